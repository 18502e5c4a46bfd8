"""Check an exported model folder (e.g. data/models/tiny).

  /usr/bin/python3 tools/train/check_export.py data/models/tiny [data/models/tiny-draft ...]

For each folder:
  * parses model.safetensors by hand (header layout, alignment, contiguous
    offsets, HF tensor names and shapes, no lm_head.weight when tied) and loads
    it into the PyTorch model;
  * if the training checkpoint (tools/train/runs/<name>/ckpt.pt) is present,
    checks that the exported weights/logits equal the in-memory trained model;
  * checks the batched (prefill) forward against an independent token-by-token
    decode with an explicit KV cache written from the HF formulas;
  * recomputes golden.json (prompt ids, greedy ids, top-5 logits);
  * checks tokenizer.json (layout, id 0 special token) and that encode ->
    decode round-trips the held-out stories, and that encoding agrees with an
    independent heap-based implementation of rank-ordered merging.
"""
import heapq
import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402
import train  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def check_safetensors_layout(path, cfg):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert (8 + n) % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(data[8:8 + n])
    assert header.pop("__metadata__") == {"format": "pt"}
    L, h, hd = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["head_dim"]
    nh, nkv, inter, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["vocab_size"]
    want = {"model.embed_tokens.weight": [V, h], "model.norm.weight": [h]}
    for i in range(L):
        p = f"model.layers.{i}."
        want.update({p + "self_attn.q_proj.weight": [nh * hd, h], p + "self_attn.k_proj.weight": [nkv * hd, h],
                     p + "self_attn.v_proj.weight": [nkv * hd, h], p + "self_attn.o_proj.weight": [h, nh * hd],
                     p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                     p + "mlp.down_proj.weight": [h, inter], p + "input_layernorm.weight": [h],
                     p + "post_attention_layernorm.weight": [h]})
    assert set(header) == set(want), set(header) ^ set(want)
    off = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert info["shape"] == want[name], (name, info["shape"])
        a, b = info["data_offsets"]
        assert a == off and b - a == math.prod(info["shape"]) * {"F32": 4, "BF16": 2, "F16": 2}[info["dtype"]], name
        off = b
    assert 8 + n + off == len(data), "trailing bytes"
    return len(data)


@torch.no_grad()
def reference_decode(sd, cfg, ids):
    """Token-at-a-time forward with a KV cache, straight from the HF Llama formulas."""
    h, hd, nh, nkv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, L = cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))

    def rms(x, w):
        return w * (x / torch.sqrt((x * x).mean() + eps))

    def rope(x, pos):  # x: [heads, hd]
        ang = pos * inv
        c, s = torch.cat([ang.cos(), ang.cos()]), torch.cat([ang.sin(), ang.sin()])
        x1, x2 = x[:, : hd // 2], x[:, hd // 2:]
        return x * c + torch.cat([-x2, x1], dim=1) * s

    W = {k: v.double() for k, v in sd.items()}
    cache = [([], []) for _ in range(L)]
    out = []
    for pos, t in enumerate(ids):
        x = W["model.embed_tokens.weight"][t]
        for i in range(L):
            p = f"model.layers.{i}."
            xn = rms(x, W[p + "input_layernorm.weight"])
            q = rope((W[p + "self_attn.q_proj.weight"] @ xn).view(nh, hd), pos)
            k = rope((W[p + "self_attn.k_proj.weight"] @ xn).view(nkv, hd), pos)
            v = (W[p + "self_attn.v_proj.weight"] @ xn).view(nkv, hd)
            cache[i][0].append(k)
            cache[i][1].append(v)
            K, V = torch.stack(cache[i][0]), torch.stack(cache[i][1])  # [pos+1, nkv, hd]
            heads = []
            for hq in range(nh):
                kv = hq // (nh // nkv)
                a = torch.softmax(K[:, kv] @ q[hq] / math.sqrt(hd), dim=0)
                heads.append(a @ V[:, kv])
            x = x + W[p + "self_attn.o_proj.weight"] @ torch.cat(heads)
            xn = rms(x, W[p + "post_attention_layernorm.weight"])
            g = W[p + "mlp.gate_proj.weight"] @ xn
            x = x + W[p + "mlp.down_proj.weight"] @ (torch.nn.functional.silu(g) * (W[p + "mlp.up_proj.weight"] @ xn))
        out.append(W["model.embed_tokens.weight"] @ rms(x, W["model.norm.weight"]))
    return torch.stack(out)


def hf_style_encode_word(word, ranks, vocab):
    """Independent rank-ordered merging with a heap (like HF tokenizers' Word::merge_all)."""
    sym = list(word)
    alive = [True] * len(sym)
    nxt = list(range(1, len(sym))) + [-1]
    prv = [-1] + list(range(len(sym) - 1))
    heap = [(ranks[(sym[i], sym[i + 1])], i) for i in range(len(sym) - 1) if (sym[i], sym[i + 1]) in ranks]
    heapq.heapify(heap)
    while heap:
        r, i = heapq.heappop(heap)
        j = nxt[i] if alive[i] else -1
        if j < 0 or ranks.get((sym[i], sym[j])) != r:
            continue
        sym[i] = sym[i] + sym[j]
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[i] >= 0:
            prv[nxt[i]] = i
        for a in (prv[i], i):
            if a >= 0 and nxt[a] >= 0 and (sym[a], sym[nxt[a]]) in ranks:
                heapq.heappush(heap, (ranks[(sym[a], sym[nxt[a]])], a))
    return [vocab[s] for s, ok in zip(sym, alive) if ok]


def check_tokenizer(folder):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    assert j["added_tokens"][0]["id"] == 0 and j["added_tokens"][0]["content"] == bpe.EOT and j["added_tokens"][0]["special"]
    assert j["pre_tokenizer"]["type"] == "ByteLevel" and j["model"]["type"] == "BPE"
    vocab = j["model"]["vocab"]
    assert vocab[bpe.EOT] == 0 and sorted(vocab.values()) == list(range(len(vocab)))
    for b in range(256):
        assert vocab[bpe.B2U[b]] == 1 + b
    for r, m in enumerate(j["model"]["merges"]):
        a, b = m.split(" ")
        assert vocab[a + b] == 257 + r and a in vocab and b in vocab
    tok = bpe.Tokenizer.load(os.path.join(folder, "tokenizer.json"))
    held = corpus.generate(1 + 1000, 300)
    text = bpe.EOT.join(held)
    ids = tok.encode(text)
    assert tok.decode(ids) == text, "round trip failed"
    assert ids.count(0) == len(held) - 1
    n = 0
    for s in held[:100] + ["Hello, world! It's 2024 -- naïve café ☃ 'll 've  spaces   \n\n tabs\t."]:
        ref = []
        for w in bpe.pretokenize(s):
            ref += hf_style_encode_word(w, tok.ranks, tok.vocab)
        assert ref == tok.encode(s), s
        assert tok.decode(tok.encode(s)) == s
        n += 1
    print(f"  tokenizer: {len(vocab)} tokens, {len(j['model']['merges'])} merges; round trip of {len(held)} held-out "
          f"stories ({len(text.encode())} bytes, {len(ids)} tokens) OK; heap-merge cross-check on {n} texts OK")
    return tok


def main():
    folders = sys.argv[1:] or ["data/models/tiny", "data/models/tiny-draft"]
    for folder in folders:
        name = os.path.basename(os.path.normpath(folder))
        print(f"== {folder}")
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        size = check_safetensors_layout(os.path.join(folder, "model.safetensors"), cfg)
        sd = train.load_safetensors(os.path.join(folder, "model.safetensors"))
        model, _ = train.load_exported(folder)
        print(f"  safetensors: {len(sd)} tensors, {size} bytes, {sum(v.numel() for v in sd.values())} parameters OK")
        tok = check_tokenizer(folder)
        ids = tok.encode(corpus.generate(1 + 1000, 1)[0])[:96]
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x)[0]
        ck = os.path.join(HERE, "runs", name, "ckpt.pt")
        if os.path.exists(ck):
            mem = train.Llama(train.make_config("tiny", cfg["vocab_size"], cfg["max_position_embeddings"]) | {
                k: cfg[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                    "num_key_value_heads", "intermediate_size", "head_dim")})
            mem.load_state_dict(torch.load(ck)["model"])
            mem.eval()
            with torch.no_grad():
                d = (mem(x)[0] - logits).abs().max().item()
            tol = 0.0 if cfg["torch_dtype"] == "float32" else 0.1
            assert d <= tol, d
            print(f"  exported logits vs in-memory trained model (checkpoint): max |diff| = {d:.3g} OK")
        else:
            print(f"  (no checkpoint {ck}; skipped comparison with the in-memory model)")
        ref = reference_decode(sd, cfg, ids).float()
        d = (ref - logits).abs().max().item()
        assert d < 1e-3, d
        print(f"  batched prefill vs token-by-token KV-cache reference over {len(ids)} positions: max |diff| = {d:.2e} OK")
        with open(os.path.join(folder, "golden.json")) as f:
            golden = json.load(f)
        for p in golden["prompts"]:
            assert tok.encode(p["text"]) == p["ids"]
            full = train.generate(model, p["ids"], len(p["greedy_ids"]))
            assert full[len(p["ids"]):] == p["greedy_ids"], p["text"]
            with torch.no_grad():
                last = model(torch.tensor([p["ids"]]))[0, -1]
            v, i = torch.topk(last, 5)
            assert [t["id"] for t in p["top5"]] == i.tolist()
            assert max(abs(t["logit"] - float(a)) for t, a in zip(p["top5"], v)) < 1e-4
        print(f"  golden.json: {len(golden['prompts'])} prompts reproduce (ids, greedy ids, top-5) OK")
    print("all checks passed")


if __name__ == "__main__":
    main()
