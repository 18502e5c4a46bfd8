#!/usr/bin/python3
"""A stand-in for pdlab built on hf_models, used only to test the test
scripts themselves (not registered as a test). It implements the CLI surface
the scripts expect:

    fake_pdlab.py info     --model DIR
    fake_pdlab.py logits   --model DIR --prompt-ids 1,2,3 --out OUT.npy [--precision f32|bf16]
    fake_pdlab.py generate --model DIR --prompt-ids 1,2,3 -n 16 --greedy --json OUT.json
                           [--temperature T] [--top-p P] [--threads N] [--device cpu|cuda]

Errors: one line on stderr, exit 2. Inject a bug for testing diagnostics with
FAKE_PDLAB_VARIANT='{"rope": "interleaved"}' (a hf_models variant dict).
"""

import json
import os
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class UserError(Exception):
    pass


def fail(msg):
    raise UserError(msg)


SIZES = {"F32": 4, "F16": 2, "BF16": 2}


def read_st(path):
    import numpy as np
    import torch
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        blob = f.read()
    if size < 8:
        fail("%s: file is truncated (%d bytes, no header length)" % (path, size))
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > size:
        fail("%s: header length %d points past the end of the file (%d bytes): truncated" % (path, n, size))
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError as e:
        fail("%s: safetensors header is not valid JSON: %s" % (path, e))
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in SIZES:
            fail("%s: tensor %s has dtype %s; supported dtypes are F32, F16, BF16" % (path, name, dt))
        if 8 + n + e > size:
            fail("%s: tensor %s data_offsets [%d, %d] point past the end of the file (truncated)" % (path, name, b, e))
        cnt = int(np.prod(shape)) if shape else 1
        if e - b != cnt * SIZES[dt]:
            fail("%s: tensor %s: data_offsets size %d does not match shape %s" % (path, name, e - b, shape))
        buf = blob[8 + n + b:8 + n + e]
        if dt == "F32":
            a = np.frombuffer(buf, "<f4").astype(np.float32)
        elif dt == "F16":
            a = np.frombuffer(buf, "<f2").astype(np.float32)
        else:
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(a.reshape(shape).copy())
    return out


def load(folder):
    import hf_models
    if not os.path.isdir(folder):
        fail("model folder %s not found" % folder)
    cpath = os.path.join(folder, "config.json")
    if not os.path.exists(cpath):
        fail("%s: missing config.json" % folder)
    try:
        cfg = json.load(open(cpath))
    except ValueError as e:
        fail("%s is not valid JSON: %s" % (cpath, e))
    if cfg.get("model_type") not in ("gpt2", "llama"):
        fail("%s: model_type %s is not supported" % (cpath, cfg.get("model_type")))
    if cfg["model_type"] == "llama" and cfg["num_attention_heads"] % cfg.get("num_key_value_heads", 1):
        fail("%s: attention heads not divisible by key/value heads" % cpath)
    single = os.path.join(folder, "model.safetensors")
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(single):
        sd = read_st(single)
    elif os.path.exists(idx):
        sd = {}
        for fn in sorted(set(json.load(open(idx))["weight_map"].values())):
            if not os.path.exists(os.path.join(folder, fn)):
                fail("%s: shard %s is missing" % (folder, fn))
            sd.update(read_st(os.path.join(folder, fn)))
    else:
        fail("%s: missing model.safetensors" % folder)
    model = hf_models.make_model(cfg, sd, variant=json.loads(os.environ.get("FAKE_PDLAB_VARIANT", "{}")))
    # shape checks through the expected shapes
    import make_checkpoint as mc
    if cfg["model_type"] == "gpt2":
        exp = dict(mc._gpt2(dict(vocab=cfg["vocab_size"], hidden=cfg["n_embd"], layers=cfg["n_layer"],
                                 heads=cfg["n_head"], ctx=cfg["n_positions"], ffn=cfg.get("n_inner"),
                                 eps=1e-5), __import__("torch").Generator())[1])
        have = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in sd.items()}
    else:
        exp = dict(mc._llama(dict(vocab=cfg["vocab_size"], hidden=cfg["hidden_size"],
                                  layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
                                  kv_heads=cfg.get("num_key_value_heads"), head_dim=cfg.get("head_dim"),
                                  ffn=cfg["intermediate_size"], ctx=1, eps=1, theta=1,
                                  tied=cfg.get("tie_word_embeddings", False)), __import__("torch").Generator())[1])
        have = sd
    for k, t in exp.items():
        if k not in have:
            fail("%s: tensor %s is missing" % (folder, k))
        if tuple(have[k].shape) != tuple(t.shape):
            fail("%s: tensor %s has shape %s, config implies %s" % (folder, k, list(have[k].shape), list(t.shape)))
    return cfg, model


def main(argv):
    import numpy as np
    import torch
    if not argv or argv[0] not in ("info", "logits", "generate"):
        fail("unknown command; usage: pdlab info|logits|generate ...")
    cmd, args = argv[0], argv[1:]
    opts = {}
    flags = {"--greedy", "--no-cache"}
    known = {"--model", "--prompt-ids", "--out", "-n", "--json", "--precision", "--temperature",
             "--top-p", "--threads", "--device"}
    i = 0
    while i < len(args):
        a = args[i]
        if a in flags:
            opts[a] = True
            i += 1
        elif a in known:
            if i + 1 >= len(args):
                fail("%s needs a value" % a)
            opts[a] = args[i + 1]
            i += 2
        else:
            fail("unknown option %s" % a)

    def num(k, typ, ok, what):
        if k not in opts:
            return None
        try:
            v = typ(opts[k])
        except ValueError:
            fail("%s: %s is not a number" % (k, opts[k]))
        if not ok(v):
            fail("%s %s: %s" % (k, opts[k], what))
        return v

    n = num("-n", int, lambda v: v >= 0, "must be >= 0")
    num("--temperature", float, lambda v: v >= 0, "must be >= 0")
    num("--top-p", float, lambda v: 0 < v <= 1, "must be in (0, 1]")
    num("--threads", int, lambda v: v >= 1, "must be >= 1")
    prec = opts.get("--precision", "f32")
    if prec not in ("f32", "bf16"):
        fail("--precision %s: must be f32 or bf16" % prec)
    if opts.get("--device", "cpu") == "cuda":
        fail("--device cuda: this build has no CUDA GPU")
    if "--model" not in opts:
        fail("--model is required")
    cfg, model = load(opts["--model"])
    if cmd == "info":
        print(json.dumps(cfg))
        return
    try:
        ids = [int(x) for x in opts.get("--prompt-ids", "").split(",")]
    except ValueError:
        fail("--prompt-ids: not a comma-separated list of integers")
    for t in ids:
        if t < 0 or t >= model.vocab:
            fail("token id %d is out of range [0, %d)" % (t, model.vocab))
    if len(ids) > model.ctx:
        fail("prompt of %d tokens exceeds the context of %d" % (len(ids), model.ctx))
    import hf_models
    if cmd == "logits":
        out = hf_models.prefill_logits(model, ids)
        if prec == "bf16":
            out = out.to(torch.bfloat16).float()
        np.save(opts["--out"], out.numpy().astype(np.float32))
    else:
        n = 16 if n is None else n
        if len(ids) + n > model.ctx + 1:
            fail("prompt + generated tokens exceed the context of %d" % model.ctx)
        got, _ = hf_models.greedy(model, ids, n)
        with open(opts["--json"], "w") as f:
            json.dump({"generated_ids": got}, f)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except UserError as e:
        sys.stderr.write("error: %s\n" % e)
        sys.exit(2)
