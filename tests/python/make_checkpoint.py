#!/usr/bin/python3
"""Builds small random Hugging Face checkpoint folders (config.json +
model.safetensors, or sharded model-0000i-of-0000n.safetensors + index), seeded.

    /usr/bin/python3 tests/python/make_checkpoint.py OUT_DIR --family llama \
        --dtype BF16 --heads 8 --kv-heads 2 [--shards 2] [--seed 7]

As a module: make_checkpoint(out_dir, family, dtype, seed=..., **shape) returns
the config dict; gen_weights()/write_checkpoint() are the two halves, for tests
that want to tamper with a checkpoint before writing it.

Weights are random with magnitudes chosen so that activations stay O(1) and
logits have a spread of several units: greedy choices are not near-ties and
logits are not all near zero.
"""

import argparse
import json
import math
import os
import sys

import torch

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402

TORCH_DTYPE_NAME = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}

GPT2_DEFAULTS = dict(vocab=384, hidden=64, layers=2, heads=4, ctx=64, ffn=None, eps=1e-5)
LLAMA_DEFAULTS = dict(vocab=320, hidden=64, layers=2, heads=4, kv_heads=None, head_dim=None,
                      ffn=160, ctx=96, eps=1e-5, theta=10000.0, tied=False, window=None, rope_scaling=None)
# The llama skeleton's relatives: Mistral (its sliding window) and Qwen2 (q/k/v biases).
LLAMA_LIKE = ("llama", "mistral", "qwen2")


def _gpt2(spec, g):
    V, D, L, H, C = spec["vocab"], spec["hidden"], spec["layers"], spec["heads"], spec["ctx"]
    F = spec["ffn"] or 4 * D
    cfg = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "n_embd": D, "n_layer": L, "n_head": H, "n_positions": C, "n_ctx": C,
        "vocab_size": V, "layer_norm_epsilon": spec["eps"],
        "activation_function": "gelu_new", "n_inner": spec["ffn"],
        "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
        "bos_token_id": V - 1, "eos_token_id": None,
    }

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    def proj(fin, fout):  # Conv1D: weight [in, out]
        return rn(fin, fout, std=1.6 / math.sqrt(fin))

    def norm_w(n):
        return 1.0 + rn(n, std=0.1)

    # wte is small next to the block outputs (else the tied head mostly repeats the
    # last token) and ln_f scales by ~2 to give logits a spread of ~4.
    t = [("wte.weight", rn(V, D, std=0.25)), ("wpe.weight", rn(C, D, std=0.2))]
    for l in range(L):
        p = "h.%d." % l
        t += [
            (p + "ln_1.weight", norm_w(D)), (p + "ln_1.bias", rn(D, std=0.1)),
            (p + "attn.c_attn.weight", proj(D, 3 * D)), (p + "attn.c_attn.bias", rn(3 * D, std=0.2)),
            (p + "attn.c_proj.weight", proj(D, D)), (p + "attn.c_proj.bias", rn(D, std=0.2)),
            (p + "ln_2.weight", norm_w(D)), (p + "ln_2.bias", rn(D, std=0.1)),
            (p + "mlp.c_fc.weight", proj(D, F)), (p + "mlp.c_fc.bias", rn(F, std=0.2)),
            (p + "mlp.c_proj.weight", proj(F, D)), (p + "mlp.c_proj.bias", rn(D, std=0.2)),
        ]
    t += [("ln_f.weight", 2.0 * norm_w(D)), ("ln_f.bias", rn(D, std=0.1))]
    return cfg, t


def _llama(spec, g, model_type="llama"):
    V, D, L, H, C = spec["vocab"], spec["hidden"], spec["layers"], spec["heads"], spec["ctx"]
    KV = spec["kv_heads"] or H
    HD = spec["head_dim"] or D // H
    F = spec["ffn"]
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                           "qwen2": "Qwen2ForCausalLM"}[model_type]],
        "model_type": model_type,
        "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": H, "num_key_value_heads": KV,
        "max_position_embeddings": C, "rms_norm_eps": spec["eps"], "rope_theta": spec["theta"],
        "vocab_size": V, "tie_word_embeddings": bool(spec["tied"]),
        "hidden_act": "silu", "rope_scaling": spec["rope_scaling"],
        "bos_token_id": 1, "eos_token_id": None,
    }
    if model_type == "llama":
        cfg["attention_bias"] = False
    if model_type == "mistral":
        cfg["sliding_window"] = spec["window"]
    if model_type == "qwen2":  # as Qwen2.5 ships: a window stated, not used
        cfg.update(use_sliding_window=False, sliding_window=4096, max_window_layers=L)
    if spec["head_dim"]:
        cfg["head_dim"] = HD

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    def lin(fout, fin):  # nn.Linear: weight [out, in]
        return rn(fout, fin, std=1.6 / math.sqrt(fin))

    def norm_w(n):
        return 1.0 + rn(n, std=0.1)

    t = [("model.embed_tokens.weight", rn(V, D, std=0.5))]
    for l in range(L):
        p = "model.layers.%d." % l
        t += [
            (p + "input_layernorm.weight", norm_w(D)),
            (p + "self_attn.q_proj.weight", lin(H * HD, D)),
            (p + "self_attn.k_proj.weight", lin(KV * HD, D)),
            (p + "self_attn.v_proj.weight", lin(KV * HD, D)),
            (p + "self_attn.o_proj.weight", lin(D, H * HD)),
        ]
        if model_type == "qwen2":
            t += [(p + "self_attn.%s_proj.bias" % n, rn(rows, std=0.3)) for n, rows in
                  (("q", H * HD), ("k", KV * HD), ("v", KV * HD))]
        t += [
            (p + "post_attention_layernorm.weight", norm_w(D)),
            (p + "mlp.gate_proj.weight", lin(F, D)),
            (p + "mlp.up_proj.weight", lin(F, D)),
            (p + "mlp.down_proj.weight", lin(D, F)),
        ]
    t += [("model.norm.weight", norm_w(D))]
    if not spec["tied"]:
        t += [("lm_head.weight", rn(V, D, std=0.5))]
    return cfg, t


def gen_weights(family, seed=0, **shape):
    """(config dict, [(name, float32 tensor)]) with canonical names
    (GPT-2: bare names, no mask buffers)."""
    if family != "gpt2" and family not in LLAMA_LIKE:
        raise ValueError("unknown family %s" % family)
    defaults = GPT2_DEFAULTS if family == "gpt2" else LLAMA_DEFAULTS
    unknown = set(shape) - set(defaults)
    if unknown:
        raise ValueError("unknown shape keys %s for %s" % (sorted(unknown), family))
    spec = dict(defaults, **shape)
    g = torch.Generator().manual_seed(seed)
    return _gpt2(spec, g) if family == "gpt2" else _llama(spec, g, family)


def gpt2_names(cfg, tensors, names="bare", mask_buffers=True):
    """Renames GPT-2 tensors: names = bare | prefixed | prefixed_lm_head, and
    adds the stored causal-mask buffers h.N.attn.bias / h.N.attn.masked_bias."""
    pre = "" if names == "bare" else "transformer."
    out = [(pre + n, t) for n, t in tensors]
    if mask_buffers:
        C = cfg["n_positions"]
        for l in range(cfg["n_layer"]):
            out.append((pre + "h.%d.attn.bias" % l, torch.tril(torch.ones(C, C)).view(1, 1, C, C)))
            out.append((pre + "h.%d.attn.masked_bias" % l, torch.tensor(-1e4)))
    if names == "prefixed_lm_head":
        out.append(("lm_head.weight", dict(tensors)["wte.weight"]))
    elif names not in ("bare", "prefixed"):
        raise ValueError("names must be bare, prefixed or prefixed_lm_head")
    return out


def write_checkpoint(out_dir, cfg, tensors, dtype="F32", shards=1):
    """Writes config.json and the weights (all in `dtype`); returns the config."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = dict(cfg, torch_dtype=TORCH_DTYPE_NAME.get(dtype, "float32"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    items = [(n, t, dtype) for n, t in tensors]
    if shards <= 1:
        hf_models.write_safetensors(os.path.join(out_dir, "model.safetensors"), items)
        return cfg
    per = math.ceil(len(items) / shards)
    weight_map, total = {}, 0
    for s in range(shards):
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = items[s * per:(s + 1) * per]
        header = hf_models.write_safetensors(os.path.join(out_dir, fname), part)
        for n, _, _ in part:
            weight_map[n] = fname
            total += header[n]["data_offsets"][1] - header[n]["data_offsets"][0]
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return cfg


def make_checkpoint(out_dir, family, dtype="F32", seed=0, shards=1, names="bare",
                    mask_buffers=True, **shape):
    cfg, tensors = gen_weights(family, seed, **shape)
    if family == "gpt2":
        tensors = gpt2_names(cfg, tensors, names, mask_buffers)
    return write_checkpoint(out_dir, cfg, tensors, dtype, shards)


def make_wellposed_checkpoint(out_dir, family, dtype="F32", seed=0, prompt=(1, 2, 3), n=16,
                              min_margin=0.05, min_distinct=5, tries=40, **kw):
    """Like make_checkpoint, but moves on to the next seed until greedy decoding
    of `prompt` for n tokens (by the float32 reference, on the dtype-rounded
    weights) has every top-1/top-2 logit gap >= min_margin and at least
    min_distinct distinct tokens. Deterministic. Returns (cfg, seed, ids, margins)."""
    import shutil
    for s in range(seed, seed + tries):
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        cfg = make_checkpoint(out_dir, family, dtype, s, **kw)
        model = hf_models.load_model(out_dir)
        ids, margins = hf_models.greedy(model, list(prompt), n)
        if min(margins) >= min_margin and len(set(ids)) >= min_distinct:
            return cfg, s, ids, margins
    raise RuntimeError("no well-posed seed in [%d, %d) for %s" % (seed, seed + tries, out_dir))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--family", choices=["gpt2"] + list(LLAMA_LIKE), default="llama")
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--names", choices=["bare", "prefixed", "prefixed_lm_head"], default="bare",
                    help="GPT-2 tensor naming")
    ap.add_argument("--no-mask-buffers", action="store_true", help="GPT-2: omit h.N.attn.bias/masked_bias")
    for k in ["vocab", "hidden", "layers", "heads", "kv-heads", "head-dim", "ffn", "ctx"]:
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--eps", type=float)
    ap.add_argument("--theta", type=float)
    ap.add_argument("--tied", type=int, choices=[0, 1])
    a = ap.parse_args()
    shape = {k: getattr(a, k) for k in ["vocab", "hidden", "layers", "heads", "kv_heads", "head_dim",
                                         "ffn", "ctx", "eps", "theta", "tied"]
             if getattr(a, k) is not None}
    cfg = make_checkpoint(a.out_dir, a.family, a.dtype, a.seed, a.shards, a.names,
                          not a.no_mask_buffers, **shape)
    print(json.dumps(cfg))


if __name__ == "__main__":
    main()
