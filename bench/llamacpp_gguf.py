#!/usr/bin/env python3
"""Write a GGUF file with the shapes of the kit's synthetic:bench-llama-125m, for llama.cpp.

    bench/llamacpp_gguf.py --gguf-py LLAMA_CPP_SRC/gguf-py --type f32|f16|bf16|q8_0|q4_0 --out FILE [--seed N]

The model is a llama (architecture "llama") of exactly the shapes of the preset in
src/io/config.cpp: hidden 768, 12 layers, 12 heads of 64, 4 KV heads, MLP 2048, vocab 32000,
context 1024, RMSNorm eps 1e-5, rope theta 10000, untied output head. Its weights are seeded
random numbers (normal, std 0.02; norms all 1): llama-bench only times the model, so the
values do not matter, only that they are finite and ordinary (no denormals, no NaN).

--type is the storage of every 2-D weight (token embedding and output head included); the
norm vectors stay f32, as llama.cpp's own converter writes them. q8_0 and q4_0 are llama.cpp's
blocks of 32 weights with one f16 scale (8-bit, and 4-bit with an offset of 8), quantized by
gguf-py's own reference code, as `llama-quantize --pure` would: every 2-D weight in that type. The vocabulary is a minimal
SentencePiece-style ("llama") one llama.cpp loads: <unk>, <s>, </s>, the 256 byte tokens
<0x00>..<0xFF>, then dummy tokens up to 32000.

The `gguf` python package is the one inside the llama.cpp source tree the benchmark binary
was built from (LLAMA_CPP_SRC/gguf-py), added to sys.path from --gguf-py; it is never copied
into this repository. Needs numpy (Debian: python3-numpy). bench/llamacpp calls this script.
"""
import argparse
import sys
import types
from pathlib import Path

# The shapes of synthetic:bench-llama-125m (src/io/config.cpp, preset "bench-llama-125m").
# bench/llamacpp checks them against `pdlab info --model synthetic:bench-llama-125m`.
SHAPES = dict(dim=768, ffn=2048, layers=12, heads=12, kv_heads=4, head_dim=64,
              vocab=32000, ctx=1024, eps=1e-5, theta=10000.0)


def die(msg):
    print(f"llamacpp_gguf.py: {msg}", file=sys.stderr)
    sys.exit(2)


def import_gguf(path):
    p = Path(path)
    if not (p / "gguf" / "__init__.py").is_file():
        die(f"{p} is not llama.cpp's gguf-py folder (no gguf/__init__.py in it); pass "
            "--gguf-py LLAMA_CPP_SRC/gguf-py")
    sys.path.insert(0, str(p))
    try:
        import sentencepiece  # noqa: F401  (gguf's vocab module imports it; we never use it)
    except ImportError:
        stub = types.ModuleType("sentencepiece")
        stub.SentencePieceProcessor = object
        sys.modules["sentencepiece"] = stub
    try:
        import gguf
    except ImportError as e:
        die(f"cannot import gguf from {p}: {e} (numpy is needed: Debian python3-numpy)")
    return gguf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--gguf-py", required=True, help="LLAMA_CPP_SRC/gguf-py")
    ap.add_argument("--type", choices=["f32", "f16", "bf16", "q8_0", "q4_0"], default="f32",
                    help="storage of the 2-D weights (default f32)")
    ap.add_argument("--out", required=True, help="the .gguf file to write")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    gguf = import_gguf(a.gguf_py)
    import numpy as np

    s = SHAPES
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
             "q4_0": gguf.GGMLQuantizationType.Q4_0}[a.type]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[a.type]

    w = gguf.GGUFWriter(a.out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    w.add_name(f"pdlab bench-llama-125m ({a.type}, random weights, seed {a.seed})")
    w.add_file_type(ftype)
    w.add_vocab_size(s["vocab"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(s["eps"])

    # A minimal SentencePiece-like vocabulary: llama.cpp needs the byte tokens (it looks up
    # "<0x0A>" for the newline) and the special ids; the rest are placeholders.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types_ = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] \
        + [gguf.TokenType.BYTE] * 256
    n_fill = s["vocab"] - len(tokens)
    tokens += [f"tok{i}" for i in range(n_fill)]
    types_ += [gguf.TokenType.NORMAL] * n_fill
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(n_fill)])
    w.add_token_types(types_)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    rng = np.random.default_rng(a.seed)

    def matrix(name, rows, cols):  # numpy [rows, cols] = ggml ne {cols, rows}, like PyTorch's [out, in]
        x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def norm(name):
        w.add_tensor(name, np.ones(s["dim"], dtype=np.float32))

    d, hd = s["dim"], s["head_dim"]
    matrix("token_embd.weight", s["vocab"], d)
    for i in range(s["layers"]):
        norm(f"blk.{i}.attn_norm.weight")
        matrix(f"blk.{i}.attn_q.weight", s["heads"] * hd, d)
        matrix(f"blk.{i}.attn_k.weight", s["kv_heads"] * hd, d)
        matrix(f"blk.{i}.attn_v.weight", s["kv_heads"] * hd, d)
        matrix(f"blk.{i}.attn_output.weight", d, s["heads"] * hd)
        norm(f"blk.{i}.ffn_norm.weight")
        matrix(f"blk.{i}.ffn_gate.weight", s["ffn"], d)
        matrix(f"blk.{i}.ffn_up.weight", s["ffn"], d)
        matrix(f"blk.{i}.ffn_down.weight", d, s["ffn"])
    norm("output_norm.weight")
    matrix("output.weight", s["vocab"], d)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({a.type}, {Path(a.out).stat().st_size / 1e6:.0f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
