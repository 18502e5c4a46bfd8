"""Train, export and golden-test the pdlab tiny Llama models.

Pipeline (all offline, CPU, reproducible from --seed):
  1. generate the story corpus (corpus.py): train split from --seed,
     held-out split from --seed + 1000
  2. train a byte-level BPE tokenizer on the train split (bpe.py), or load one
     with --tokenizer (the draft model reuses the main model's tokenizer)
  3. train a Llama-style model (GQA, RoPE, RMSNorm, SwiGLU, tied embeddings)
     with AdamW and a cosine LR schedule with warmup; checkpoints so that
     --resume continues exactly where it stopped
  4. export a Hugging Face style folder: config.json, model.safetensors
     (written by hand), tokenizer.json, golden.json, metrics.json

Examples (see README.md for the exact commands used for the shipped models):
  /usr/bin/python3 tools/train/train.py --preset tiny --steps 2000 --out data/models/tiny
  /usr/bin/python3 tools/train/train.py --preset draft --steps 1200 \
      --tokenizer data/models/tiny/tokenizer.json --out data/models/tiny-draft
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

import re

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402

PRESETS = {
    "tiny": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                 intermediate_size=688),
    "draft": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=344),
}

GOLDEN_PROMPTS = ["Once upon a time", "The little cat", "One day, Tom went to the", "She was very happy because"]


# ----------------------------------------------------------------------------- model
class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_cos_sin(cfg, n, device=None):
    d = cfg["head_dim"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
    t = torch.arange(n, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # [pos, d], HF "rotate half" layout
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat([-x2, x1], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, hd = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], hd
        self.q_proj = nn.Linear(h, self.nh * hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, h, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.nh // self.nkv  # query head h uses kv head h // g
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Llama(nn.Module):
    """Module names mirror Hugging Face LlamaForCausalLM (model.layers.N.self_attn.q_proj ...)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)
        assert cfg["tie_word_embeddings"]
        cos, sin = rope_cos_sin(cfg, cfg["max_position_embeddings"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        std = 0.02
        for n, p in self.named_parameters():
            if p.dim() == 2:
                s = std / math.sqrt(2 * cfg["num_hidden_layers"]) if n.endswith(("o_proj.weight", "down_proj.weight")) else std
                nn.init.normal_(p, 0.0, s)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.model.embed_tokens(ids)
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        return x @ self.model.embed_tokens.weight.t()  # tied lm_head


def make_config(preset, vocab_size, ctx):
    c = dict(PRESETS[preset])
    c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    c.update(vocab_size=vocab_size, max_position_embeddings=ctx, rms_norm_eps=1e-5, rope_theta=10000.0,
             tie_word_embeddings=True)
    return c


# ----------------------------------------------------------------------------- safetensors
ST_DTYPES = {"F32": (torch.float32, np.float32, 4), "BF16": (torch.bfloat16, None, 2), "F16": (torch.float16, np.float16, 2)}


def save_safetensors(path, tensors, dtype="F32"):
    """tensors: list of (name, float tensor). Written by hand: u64 LE header length, JSON header, raw data."""
    header, blobs, off = {}, [], 0
    for name, t in tensors:
        t = t.detach().to(torch.float32).contiguous()
        if dtype == "F32":
            raw = t.numpy().astype("<f4").tobytes()
        elif dtype == "BF16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Parse a safetensors file by hand; returns {name: float32 tensor} (BF16/F16 upcast exactly)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = data[base + a: base + b]
        if info["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4").astype(np.float32)
        elif info["dtype"] == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(info["dtype"])
        out[name] = torch.from_numpy(arr.copy()).reshape(info["shape"])
    return out


def export_tensors(model):
    return [(n, p) for n, p in model.state_dict().items() if n.startswith("model.")]


def load_exported(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    m = Llama(cfg)
    sd = load_safetensors(os.path.join(folder, "model.safetensors"))
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and not missing, (missing, unexpected)
    m.eval()
    return m, cfg


# ----------------------------------------------------------------------------- data
def pack(stories_ids, seq, rng):
    """Sequences of seq+1 tokens; each one starts at a story start (position 0 = first
    token of a story, as in a prompt without BOS), stories separated by <|endoftext|>."""
    order = list(range(len(stories_ids)))
    rng.shuffle(order)
    out, cur, i = [], [], 0
    while i < len(order):
        cur = []
        while len(cur) < seq + 1 and i < len(order):
            cur += stories_ids[order[i]] + [0]
            i += 1
        if len(cur) >= seq + 1:
            out.append(cur[: seq + 1])
    return out


class Batches:
    """Deterministic batch for any step: epoch e uses a shuffle seeded by (seed, e)."""

    def __init__(self, stories_ids, seq, batch, seed):
        self.s, self.seq, self.batch, self.seed = stories_ids, seq, batch, seed
        self.epoch, self.seqs = None, None
        self.per_epoch = len(pack(stories_ids, seq, random.Random(seed))) // batch

    def get(self, step):
        e, k = divmod(step, self.per_epoch)
        if e != self.epoch:
            self.epoch = e
            self.seqs = torch.tensor(pack(self.s, self.seq, random.Random(self.seed * 1000003 + e)), dtype=torch.long)
        return self.seqs[k * self.batch:(k + 1) * self.batch]


@torch.no_grad()
def evaluate(model, seqs, byte_len, bs=16):
    """Mean loss (nats/token) and bits per byte over the targets of the packed held-out sequences.
    Bytes are the UTF-8 bytes of the predicted tokens; <|endoftext|> counts as 1 byte (a separator)."""
    model.eval()
    tot, ntok, nbytes = 0.0, 0, 0
    for i in range(0, len(seqs), bs):
        x = seqs[i:i + bs]
        logits = model(x[:, :-1])
        tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        ntok += x[:, 1:].numel()
        nbytes += int(byte_len[x[:, 1:]].sum())
    model.train()
    return tot / ntok, tot / nbytes / math.log(2)


# ----------------------------------------------------------------------------- generation / golden
@torch.no_grad()
def generate(model, ids, n, temperature=0.0, gen=None, stop_eos=False):
    ids = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.cfg["max_position_embeddings"]:]]))[0, -1]
        if temperature == 0.0:
            nxt = int(torch.argmax(logits))
        else:
            nxt = int(torch.multinomial(F.softmax(logits / temperature, -1), 1, generator=gen))
        if stop_eos and nxt == 0:
            break
        ids.append(nxt)
    return ids


@torch.no_grad()
def write_golden(folder, name, tok):
    model, _ = load_exported(folder)  # float32 from exactly the stored weights
    prompts = []
    for text in GOLDEN_PROMPTS:
        ids = tok.encode(text)
        full = generate(model, ids, 32)
        logits = model(torch.tensor([ids]))[0, -1]
        v, i = torch.topk(logits, 5)
        prompts.append({"text": text, "ids": ids, "greedy_ids": full[len(ids):],
                        "greedy_text": tok.decode(full[len(ids):]),
                        "top5": [{"id": int(a), "logit": float(b)} for a, b in zip(i, v)]})
    text = json.dumps({"model": name, "dtype": "float32", "prompts": prompts}, indent=1)
    text = re.sub(r"\[[-0-9.e,\s]*\]", lambda m: re.sub(r"\s+", "", m.group(0)).replace(",", ", "), text)
    with open(os.path.join(folder, "golden.json"), "w") as f:
        f.write(text + "\n")
    return prompts


@torch.no_grad()
def samples(folder, tok, seed):
    model, _ = load_exported(folder)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for p in ["Once upon a time", "One day, Lily went to the", "The little dog"]:
        ids = tok.encode(p)
        out.append({"prompt": p, "mode": "greedy", "text": tok.decode(generate(model, ids, 80, stop_eos=True))})
        out.append({"prompt": p, "mode": "sampled T=0.8 seed %d" % seed,
                    "text": tok.decode(generate(model, ids, 80, 0.8, gen, stop_eos=True))})
    return out


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--name", default=None, help="model name in golden.json (default: folder name)")
    ap.add_argument("--out", required=True, help="export folder, e.g. data/models/tiny")
    ap.add_argument("--tokenizer", default=None, help="reuse this tokenizer.json instead of training one")
    ap.add_argument("--vocab", type=int, default=2048, help="BPE target vocab (stops early when merges run out)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-stories", type=int, default=60000)
    ap.add_argument("--eval-stories", type=int, default=1000)
    ap.add_argument("--ctx", type=int, default=512, help="max_position_embeddings")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ckpt", default=None, help="checkpoint file (default tools/train/runs/<name>/ckpt.pt)")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--export-only", action="store_true", help="skip training, export from --ckpt")
    ap.add_argument("--dtype", choices=["auto", "F32", "BF16"], default="auto")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    name = a.name or os.path.basename(os.path.normpath(a.out))
    ckpt = a.ckpt or os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs", name, "ckpt.pt")
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()

    train_text = corpus.generate(a.seed, a.train_stories)
    eval_text = corpus.generate(a.seed + 1000, a.eval_stories)
    if a.tokenizer:
        tok = bpe.Tokenizer.load(a.tokenizer)
    else:
        tok = bpe.train(train_text[:20000], a.vocab)
    print(f"tokenizer: {len(tok)} tokens, {len(tok.merges)} merges ({time.time() - t0:.1f}s)", flush=True)
    train_ids = [tok.encode(s) for s in train_text]
    eval_ids = [tok.encode(s) for s in eval_text]
    ntok = sum(map(len, train_ids)) + len(train_ids)
    nbyte = sum(len(s.encode()) + 1 for s in train_text)
    print(f"corpus: {len(train_text)} train stories, {ntok} tokens, {nbyte / ntok:.2f} bytes/token; "
          f"{len(eval_text)} held-out stories ({time.time() - t0:.1f}s)", flush=True)
    byte_len = torch.tensor([1 if i == 0 else len(bytes(bpe.U2B[c] for c in tok.inv[i])) for i in range(len(tok))])
    eval_seqs = torch.tensor(pack(eval_ids, a.seq, random.Random(0)), dtype=torch.long)

    cfg = make_config(a.preset, len(tok), a.ctx)
    model = Llama(cfg)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {json.dumps(cfg)}; {nparams} parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    batches = Batches(train_ids, a.seq, a.batch, a.seed)
    step, train_secs, history = 0, 0.0, []
    if a.resume or a.export_only:
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, train_secs, history = st["step"], st["train_secs"], st["history"]
        torch.set_rng_state(st["torch_rng"])
        print(f"resumed from {ckpt} at step {step}", flush=True)

    def lr_at(s):
        if s < a.warmup:
            return a.lr * (s + 1) / a.warmup
        p = min(1.0, (s - a.warmup) / max(1, a.steps - a.warmup))
        return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * p))

    def save_ckpt():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "train_secs": train_secs,
                    "history": history, "torch_rng": torch.get_rng_state(), "args": vars(a)}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)

    model.train()
    tw, tokens_window = time.time(), 0
    while step < a.steps and not a.export_only:
        ts = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = batches.get(step)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        train_secs += time.time() - ts
        tokens_window += x[:, 1:].numel()
        if step % 10 == 0 or step == a.steps:
            tps = tokens_window / (time.time() - tw)
            eta = (a.steps - step) * (train_secs / step if not a.resume else (time.time() - tw) / 10)
            print(f"step {step}/{a.steps} loss {loss.item():.4f} lr {lr_at(step - 1):.2e} {tps:.0f} tok/s "
                  f"elapsed {train_secs / 60:.1f} min ETA {eta / 60:.1f} min", flush=True)
            tw, tokens_window = time.time(), 0
        if step % a.eval_every == 0 or step == a.steps:
            el, bpb = evaluate(model, eval_seqs, byte_len)
            history.append({"step": step, "train_loss": loss.item(), "eval_loss": el, "eval_bpb": bpb,
                            "train_secs": train_secs})
            print(f"eval step {step}: held-out loss {el:.4f} nats/token, {bpb:.4f} bits/byte", flush=True)
            tw = time.time()
        if step % a.ckpt_every == 0 or step == a.steps:
            save_ckpt()

    # ---- export
    model.eval()
    nbytes_f32 = 4 * sum(p.numel() for n, p in export_tensors(model))
    dtype = a.dtype if a.dtype != "auto" else ("F32" if nbytes_f32 <= 20e6 else "BF16")
    save_safetensors(os.path.join(a.out, "model.safetensors"), export_tensors(model), dtype)
    hf_cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": cfg["hidden_size"],
              "intermediate_size": cfg["intermediate_size"], "num_hidden_layers": cfg["num_hidden_layers"],
              "num_attention_heads": cfg["num_attention_heads"], "num_key_value_heads": cfg["num_key_value_heads"],
              "head_dim": cfg["head_dim"], "max_position_embeddings": cfg["max_position_embeddings"],
              "rms_norm_eps": cfg["rms_norm_eps"], "rope_theta": cfg["rope_theta"], "vocab_size": cfg["vocab_size"],
              "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
              "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": {"F32": "float32", "BF16": "bfloat16"}[dtype]}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(hf_cfg, f, indent=2)
        f.write("\n")
    tok.save(os.path.join(a.out, "tokenizer.json"))
    golden = write_golden(a.out, name, tok)
    exported, _ = load_exported(a.out)
    el, bpb = evaluate(exported, eval_seqs, byte_len)
    metrics = {"name": name, "preset": a.preset, "parameters": nparams, "dtype": dtype, "steps": step,
               "batch": a.batch, "seq": a.seq, "train_tokens_seen": step * a.batch * a.seq,
               "train_minutes": round(train_secs / 60, 2), "threads": a.threads, "seed": a.seed,
               "heldout_loss_nats_per_token": round(el, 4), "heldout_bits_per_byte": round(bpb, 4),
               "heldout_tokens": int(eval_seqs[:, 1:].numel()), "vocab_size": len(tok),
               "history": history, "samples": samples(a.out, tok, a.seed), "argv": sys.argv[1:]}
    with open(os.path.join(a.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
        f.write("\n")
    print(f"exported {a.out} ({dtype}); held-out loss {el:.4f} nats/token, {bpb:.4f} bits/byte", flush=True)
    for g in golden:
        print(f"  {g['text']!r} -> {g['greedy_text']!r}", flush=True)


if __name__ == "__main__":
    main()
