#!/usr/bin/env python3
"""Write a synthetic Hugging Face checkpoint (config.json + model.safetensors,
float32) of the bench-llama-125m shape: 124.7 M parameters, 499 MB. For timing
how long the kit takes to load a real-size checkpoint from the page cache:

    bench/make_checkpoint.py /tmp/pdlab-ckpt
    build/src/pdlab/pdlab info --model /tmp/pdlab-ckpt     # twice: the 2nd is warm

Needs only numpy. The weights are random (seeded); the loader does not care."""
import json
import os
import sys

import numpy as np

D, F, L, H, KV, HD, V, CTX = 768, 2048, 12, 12, 4, 64, 32000, 1024


def tensors():
    yield "model.embed_tokens.weight", (V, D)
    for l in range(L):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", (D,)
        yield p + "self_attn.q_proj.weight", (H * HD, D)
        yield p + "self_attn.k_proj.weight", (KV * HD, D)
        yield p + "self_attn.v_proj.weight", (KV * HD, D)
        yield p + "self_attn.o_proj.weight", (D, H * HD)
        yield p + "post_attention_layernorm.weight", (D,)
        yield p + "mlp.gate_proj.weight", (F, D)
        yield p + "mlp.up_proj.weight", (F, D)
        yield p + "mlp.down_proj.weight", (D, F)
    yield "model.norm.weight", (D,)
    yield "lm_head.weight", (V, D)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/pdlab-ckpt"
    os.makedirs(out, exist_ok=True)
    header, offset, shapes = {}, 0, list(tensors())
    for name, shape in shapes:
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-byte aligned
    rng = np.random.default_rng(0)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(len(head).to_bytes(8, "little"))
        f.write(head)
        for name, shape in shapes:
            if len(shape) == 1:
                a = np.ones(shape, dtype=np.float32)
            else:
                a = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
            f.write(a.tobytes())
    config = {
        "model_type": "llama", "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": H, "num_key_value_heads": KV, "vocab_size": V,
        "max_position_embeddings": CTX, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    print(f"wrote {out}/model.safetensors ({size / 1e6:.1f} MB, {offset // 4 / 1e6:.1f} M parameters)")


if __name__ == "__main__":
    main()
