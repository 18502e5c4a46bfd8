#!/usr/bin/python3
"""Checks the test tooling itself, without pdlab:

  * the safetensors writer, read back by hf_models' own reader (and by a
    byte-level parse here), for F32/F16/BF16, single file and sharded;
  * the PyTorch references against a second, naive float64 numpy
    formulation written token by token, head by head (GPT-2 and Llama; rotary
    done as complex rotation of (i, i + d/2) pairs, GQA by explicit index);
  * bare vs transformer.-prefixed (with/without lm_head) GPT-2 give identical logits;
  * sharded and single-file checkpoints give identical logits;
  * KV-cached greedy decoding equals full recompute.

    /usr/bin/python3 tests/python/self_check.py

Ends with "N passed, M failed"; exit 0 only if all passed.
"""

import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models  # noqa: E402
import make_checkpoint as mc  # noqa: E402

torch.set_num_threads(1)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s %s %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


# ---------------------------------------------------------------- naive numpy


def naive_gpt2(cfg, sd, ids):
    w = {k[len("transformer."):] if k.startswith("transformer.") else k: v.double().numpy() for k, v in sd.items()}
    D, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    hd = D // H
    eps = cfg["layer_norm_epsilon"]

    def ln(x, p):
        mu = x.mean()
        var = ((x - mu) ** 2).mean()
        return (x - mu) / math.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    xs = [w["wte.weight"][t] + w["wpe.weight"][i] for i, t in enumerate(ids)]
    for l in range(L):
        p = "h.%d." % l
        qs, ks, vs = [], [], []
        for x in xs:
            a = ln(x, p + "ln_1")
            qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            qs.append(qkv[:D]), ks.append(qkv[D:2 * D]), vs.append(qkv[2 * D:])
        new = []
        for i, x in enumerate(xs):
            o = np.zeros(D)
            for h in range(H):
                sl = slice(h * hd, (h + 1) * hd)
                s = np.array([qs[i][sl] @ ks[j][sl] / math.sqrt(hd) for j in range(i + 1)])
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                o[sl] = sum(pr[j] * vs[j][sl] for j in range(i + 1))
            x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            m = gelu(ln(x, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
            new.append(x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
        xs = new
    return np.stack([ln(x, "ln_f") @ w["wte.weight"].T for x in xs])


def naive_llama(cfg, sd, ids):
    w = {k: v.double().numpy() for k, v in sd.items()}
    D, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    half = hd // 2
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]

    def rms(x, p):
        return w[p] * x / math.sqrt((x * x).mean() + eps)

    def rot(vec, pos):  # pairs (i, i+half) as complex numbers, angle pos * theta^(-2i/hd)
        z = vec[:half] + 1j * vec[half:]
        ang = np.array([pos * theta ** (-2.0 * i / hd) for i in range(half)])
        z = z * np.exp(1j * ang)
        return np.concatenate([z.real, z.imag])

    xs = [w["model.embed_tokens.weight"][t] for t in ids]
    for l in range(L):
        p = "model.layers.%d." % l
        qs, ks, vs = [], [], []
        for pos, x in enumerate(xs):
            a = rms(x, p + "input_layernorm.weight")
            q = w[p + "self_attn.q_proj.weight"] @ a
            k = w[p + "self_attn.k_proj.weight"] @ a
            v = w[p + "self_attn.v_proj.weight"] @ a
            qs.append([rot(q[h * hd:(h + 1) * hd], pos) for h in range(H)])
            ks.append([rot(k[h * hd:(h + 1) * hd], pos) for h in range(KV)])
            vs.append([v[h * hd:(h + 1) * hd] for h in range(KV)])
        new = []
        for i, x in enumerate(xs):
            o = []
            for h in range(H):
                kh = h // (H // KV)
                s = np.array([qs[i][h] @ ks[j][kh] / math.sqrt(hd) for j in range(i + 1)])
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                o.append(sum(pr[j] * vs[j][kh] for j in range(i + 1)))
            x = x + w[p + "self_attn.o_proj.weight"] @ np.concatenate(o)
            a = rms(x, p + "post_attention_layernorm.weight")
            g = w[p + "mlp.gate_proj.weight"] @ a
            u = w[p + "mlp.up_proj.weight"] @ a
            new.append(x + w[p + "mlp.down_proj.weight"] @ (g / (1 + np.exp(-g)) * u))
        xs = new
    return np.stack([head @ rms(x, "model.norm.weight") for x in xs])


# ---------------------------------------------------------------- checks


def check_safetensors(tmp):
    g = torch.Generator().manual_seed(3)
    ts = {"a": torch.randn(3, 5, generator=g), "b.c": torch.randn(7, generator=g) * 100,
          "scalar": torch.tensor(-1e4), "big": torch.randn(2, 3, 4, generator=g)}
    for dt in ["F32", "F16", "BF16"]:
        path = os.path.join(tmp, "t_%s.safetensors" % dt)
        hf_models.write_safetensors(path, [(k, v, dt) for k, v in ts.items()])
        back, dts = hf_models.read_safetensors(path)
        ok = all(torch.equal(back[k], hf_models.round_to_dtype(v, dt)) for k, v in ts.items())
        ok = ok and set(dts.values()) == {dt} and back["scalar"].shape == ()
        # byte-level: u64 LE header length, header padded to 8, offsets contiguous from 0
        blob = open(path, "rb").read()
        (n,) = struct.unpack("<Q", blob[:8])
        hdr = json.loads(blob[8:8 + n])
        spans = sorted(v["data_offsets"] for k, v in hdr.items() if k != "__metadata__")
        contiguous = spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        ok = ok and n % 8 == 0 and contiguous and 8 + n + spans[-1][1] == len(blob)
        ok = ok and hdr["__metadata__"] == {"format": "pt"}
        # rounding sanity: BF16 keeps 8 significant bits, F16 11
        if dt == "BF16":
            x = back["a"].numpy().view(np.uint32)
            ok = ok and bool((x & 0xFFFF == 0).all())
        check("safetensors roundtrip " + dt, ok)
    # BF16 round-to-nearest-even of a known value: 1 + 2^-8 (tie) -> 1.0; 1 + 3*2^-8 -> 1 + 2^-6
    v = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20])
    r = hf_models.round_to_dtype(v, "BF16").tolist()
    check("bf16 round-to-nearest-even", r == [1.0, 1 + 2 ** -6, 1 + 2 ** -7], str(r))


def check_gelu():
    x = torch.linspace(-6, 6, 1001)
    d = (hf_models.gelu_new(x) - torch.nn.functional.gelu(x, approximate="tanh")).abs().max().item()
    check("gelu_new == torch gelu(tanh)", d < 1e-6, "max %.2e" % d)


def max_rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / (1e-3 + np.abs(b))))


def check_models(tmp):
    ids = [5, 17, 3, 99, 42, 7, 250, 11, 64, 2]
    cases = [
        ("gpt2 F32", "gpt2", "F32", {}),
        ("gpt2 BF16 ffn=96", "gpt2", "BF16", dict(ffn=96)),
        ("llama MHA F32", "llama", "F32", {}),
        ("llama GQA 8/2 F16", "llama", "F16", dict(heads=8, kv_heads=2)),
        ("llama MQA tied", "llama", "F32", dict(heads=4, kv_heads=1, tied=True)),
        ("llama head_dim=24 heads=4 hidden=64", "llama", "BF16", dict(heads=4, kv_heads=2, head_dim=24)),
        ("llama theta=500000", "llama", "F32", dict(theta=500000.0)),
    ]
    for i, (name, fam, dt, shape) in enumerate(cases):
        d = os.path.join(tmp, "m%d" % i)
        cfg, seed, _, _ = mc.make_wellposed_checkpoint(d, fam, dt, seed=10 + i, prompt=ids, **shape)
        cfg2, sd = hf_models.load_checkpoint(d)
        model = hf_models.make_model(cfg2, sd)
        ref = hf_models.prefill_logits(model, ids).numpy()
        nv = (naive_gpt2 if fam == "gpt2" else naive_llama)(cfg2, sd, ids)
        err = np.abs(ref - nv).max()
        spread = ref.std()
        check("torch vs naive " + name, err < 1e-4 * max(1, np.abs(nv).max()),
              "max abs %.2e, logit std %.2f, |max| %.1f (seed %d)" % (err, spread, np.abs(nv).max(), seed))
        # float64 torch vs float32 torch (how much f32 rounding alone moves logits)
        m64 = hf_models.make_model(cfg2, sd, torch.float64)
        r64 = hf_models.prefill_logits(m64, ids).numpy()
        check("torch f64 vs naive " + name, np.abs(r64 - nv).max() < 1e-9, "max abs %.2e" % np.abs(r64 - nv).max())
        # cached greedy == recompute greedy, and with margins away from ties
        g1, m1 = hf_models.greedy(model, ids, 16, use_cache=True)
        g2, m2 = hf_models.greedy(model, ids, 16, use_cache=False)
        check("kv-cache greedy == recompute " + name, g1 == g2, "min margin %.3f ids %s" % (min(m1), g1[:6]))
        # generation should not collapse to one repeated token
        check("greedy is not degenerate " + name, len(set(g1)) >= 3 and min(m1) > 1e-2,
              "%d distinct, min margin %.3f" % (len(set(g1)), min(m1)))


def check_naming(tmp):
    ids = [1, 2, 3, 4, 5, 6, 7, 8]
    outs = {}
    for names in ["bare", "prefixed", "prefixed_lm_head"]:
        d = os.path.join(tmp, "g_" + names)
        mc.make_checkpoint(d, "gpt2", "F16", seed=77, names=names)
        cfg, sd = hf_models.load_checkpoint(d)
        keys = set(sd)
        if names == "bare":
            ok = "wte.weight" in keys and "h.0.attn.bias" in keys and "h.1.attn.masked_bias" in keys
        else:
            ok = "transformer.wte.weight" in keys and ("lm_head.weight" in keys) == (names == "prefixed_lm_head")
        check("gpt2 key names " + names, ok)
        outs[names] = hf_models.prefill_logits(hf_models.make_model(cfg, sd), ids)
    check("gpt2 bare == prefixed == prefixed+lm_head",
          torch.equal(outs["bare"], outs["prefixed"]) and torch.equal(outs["bare"], outs["prefixed_lm_head"]))


def check_shards(tmp):
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    a, b = os.path.join(tmp, "one"), os.path.join(tmp, "three")
    mc.make_checkpoint(a, "llama", "BF16", seed=5, heads=8, kv_heads=2)
    mc.make_checkpoint(b, "llama", "BF16", seed=5, heads=8, kv_heads=2, shards=3)
    files = sorted(os.listdir(b))
    idx = json.load(open(os.path.join(b, "model.safetensors.index.json")))
    check("sharded layout", files == ["config.json", "model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                      "model.safetensors.index.json"]
          and len(set(idx["weight_map"].values())) == 3, str(files))
    la = hf_models.prefill_logits(hf_models.load_model(a), ids)
    lb = hf_models.prefill_logits(hf_models.load_model(b), ids)
    check("sharded == single file", torch.equal(la, lb))


def check_variants(tmp):
    """The diagnostic variants of test_reference.py must each change the logits."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_reference as tr
    ids = [5, 17, 3, 99, 42, 7, 250, 11]
    for fam, shape in [("gpt2", dict(eps=0.05)), ("llama", dict(heads=8, kv_heads=2, eps=0.05, theta=500.0))]:
        cfg, t = mc.gen_weights(fam, 4, **shape)
        sd = dict(t)
        ref = hf_models.prefill_logits(hf_models.make_model(cfg, sd), ids)
        for desc, var in tr.variants_for(cfg):
            d = (hf_models.prefill_logits(hf_models.make_model(cfg, sd, variant=var), ids) - ref).abs().max().item()
            check("variant changes logits: %s %s" % (fam, desc), d > 1e-3, "max diff %.2e" % d)


def main():
    with tempfile.TemporaryDirectory(prefix="pdlab_selfcheck_") as tmp:
        check_safetensors(tmp)
        check_gelu()
        check_models(tmp)
        check_naming(tmp)
        check_shards(tmp)
        check_variants(tmp)
    n_ok = sum(results)
    print("%d passed, %d failed" % (n_ok, len(results) - n_ok))
    sys.exit(0 if n_ok == len(results) else 1)


if __name__ == "__main__":
    main()
