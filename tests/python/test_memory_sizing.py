#!/usr/bin/python3
"""pdlab sizes memory to the request, not to the config (issue 19).

    /usr/bin/python3 tests/python/test_memory_sizing.py --pdlab build/src/pdlab/pdlab

A tiny Llama checkpoint (a few KB of weights) whose config.json claims a
context of 2,000,000 positions. A cache and rotary tables for the whole
context would take 2e6 x 2 KiB/position (cache: 2 x 4 layers x 4 KV heads x
16 x 4 B) + 2e6 x 64 B (rope) = ~4.2 GB:

  info_small            `pdlab info` peaks under 1 GB of resident memory
  generate_small        a short `pdlab generate`, under the same bound
  max_seq_small         `pdlab generate --max-seq 64`, under the same bound
  cache_over_memory     a `bench` whose cache (batch 100000 x 2,000,000 positions) is far
                        beyond any machine's memory: exit 2, and the message names the
                        size and how to ask for less

The bound is on the child's peak resident set (wait4's ru_maxrss), not an
address-space limit, so the test holds under AddressSanitizer too (which
reserves terabytes of address space but touches little of it). A cache for the
whole context is zero-filled, so it would show as ~4 GB resident.

No torch needed: the checkpoint is written with struct and json.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

CONTEXT = 2_000_000
SHAPE = dict(dim=64, ffn=64, layers=4, heads=4, kv_heads=4, head_dim=16, vocab=64)
PEAK_RSS_KB = 1_000_000  # a cache for the whole context alone would be ~4,200,000 kB


def llama_tensors():
    """(name, shape) of every tensor of the tiny Llama, with a tied head."""
    d, f, kv = SHAPE["dim"], SHAPE["ffn"], SHAPE["kv_heads"] * SHAPE["head_dim"]
    q = SHAPE["heads"] * SHAPE["head_dim"]
    out = [("model.embed_tokens.weight", [SHAPE["vocab"], d]), ("model.norm.weight", [d])]
    for layer in range(SHAPE["layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", [d]), (p + "post_attention_layernorm.weight", [d]),
                (p + "self_attn.q_proj.weight", [q, d]), (p + "self_attn.k_proj.weight", [kv, d]),
                (p + "self_attn.v_proj.weight", [kv, d]), (p + "self_attn.o_proj.weight", [d, q]),
                (p + "mlp.gate_proj.weight", [f, d]), (p + "mlp.up_proj.weight", [f, d]),
                (p + "mlp.down_proj.weight", [d, f])]
    return out


def write_checkpoint(folder):
    header, blobs, offset = {}, [], 0
    for i, (name, shape) in enumerate(llama_tensors()):
        n = 1
        for s in shape:
            n *= s
        # Small values that vary by tensor and element: logits are finite and distinct.
        data = struct.pack(f"<{n}f", *[((i * 31 + k * 7) % 13 - 6) * 0.01 for k in range(n)])
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    config = {"model_type": "llama", "hidden_size": SHAPE["dim"], "intermediate_size": SHAPE["ffn"],
              "num_hidden_layers": SHAPE["layers"], "num_attention_heads": SHAPE["heads"],
              "num_key_value_heads": SHAPE["kv_heads"], "head_dim": SHAPE["head_dim"],
              "vocab_size": SHAPE["vocab"], "max_position_embeddings": CONTEXT,
              "tie_word_embeddings": True}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def run(cmd):
    """Runs cmd; returns (exit code, stderr, peak resident set in kB)."""
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return child.returncode, err.read().decode(errors="replace"), usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        write_checkpoint(folder)
        model = ["--model", folder, "--threads", "1"]
        small = [
            ("info_small", ["info"]),
            ("generate_small", ["generate", "--prompt-ids", "1,2,3", "-n", "4", "--greedy"]),
            ("max_seq_small", ["generate", "--prompt-ids", "1,2,3", "-n", "4", "--greedy", "--max-seq", "64"]),
        ]
        for name, cmd in small:
            code, err, peak_kb = run([args.pdlab] + cmd + model)
            ok = code == 0 and peak_kb < PEAK_RSS_KB
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: exit {code}, peak {peak_kb} kB resident"
                  + ("" if ok else f" (expected exit 0 under {PEAK_RSS_KB} kB: pdlab must size its cache to "
                                   f"the request, not to the {CONTEXT}-position context; stderr: {err.strip()[:300]})"))
        code, err, _ = run([args.pdlab, "bench", "--prompt-len", "1999000", "--gen", "8", "--batch", "100000",
                            "--repeats", "1", "--warmup", "0"] + model)
        ok = code == 2 and "GiB" in err and "fewer" in err
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} cache_over_memory: exit {code}: {err.strip()[:300]}"
              + ("" if ok else " (expected exit 2 and a message naming the size in GiB and how to ask "
                               "for fewer positions)"))
    print(f"{4 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
