"""Independent PyTorch reference models with Hugging Face semantics, plus a
small safetensors reader/writer (the `safetensors` package is not available).

Everything here computes in float32 (or float64 for the second, naive
formulation used by self_check.py); weights stored as F16/BF16 are widened to
float32 exactly, so the reference sees the same dtype-rounded weights as the
program under test.

Run with Debian's interpreter: /usr/bin/python3 (torch 1.13, numpy).
"""

import json
import math
import os
import struct

import numpy as np
import torch

# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

ST_DTYPES = {"F32": 4, "F16": 2, "BF16": 2}


def to_dtype_bytes(t, dtype):
    """float tensor -> little-endian bytes in `dtype` (F32/F16/BF16), RNE rounding."""
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError("unsupported dtype " + dtype)


def round_to_dtype(t, dtype):
    """The float32 value a tensor has after being stored as `dtype`."""
    if dtype == "F32":
        return t.to(torch.float32)
    if dtype == "F16":
        return t.to(torch.float16).to(torch.float32)
    if dtype == "BF16":
        return t.to(torch.bfloat16).to(torch.float32)
    raise ValueError(dtype)


def build_safetensors(tensors, raw=None, metadata=None):
    """tensors: list of (name, tensor, dtype). Returns (header_dict, data_bytes).

    raw: optional {name: (dtype_string, shape, bytes)} written verbatim (for
    odd tensors such as deliberately unknown dtypes)."""
    header = {}
    chunks = []
    off = 0
    for name, t, dtype in tensors:
        b = to_dtype_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    for name, (dtype, shape, b) in (raw or {}).items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    return header, b"".join(chunks)


def serialize_safetensors(header, data):
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # like the reference implementation: pad the header with spaces to 8 bytes
    hj += b" " * ((8 - len(hj) % 8) % 8)
    return struct.pack("<Q", len(hj)) + hj + data


def write_safetensors(path, tensors, raw=None, metadata=None):
    header, data = build_safetensors(tensors, raw, metadata)
    with open(path, "wb") as f:
        f.write(serialize_safetensors(header, data))
    return header


def read_safetensors(path):
    """Own small reader: {name: float32 torch tensor}, and {name: dtype}."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(path + ": too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(path + ": header past the end")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out, dtypes = {}, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if base + e > len(blob) or b > e:
            raise ValueError("%s: tensor %s past the end" % (path, name))
        count = int(np.prod(shape)) if shape else 1
        if dt not in ST_DTYPES or (e - b) != count * ST_DTYPES[dt]:
            raise ValueError("%s: bad tensor %s" % (path, name))
        buf = blob[base + b:base + e]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        else:  # BF16: the top 16 bits of a float32
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(a.reshape(shape).copy())
        dtypes[name] = dt
    return out, dtypes


def load_checkpoint(folder):
    """config dict and float32 state dict of a HF folder (single file or sharded)."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    sd = {}
    if os.path.exists(single):
        sd, _ = read_safetensors(single)
    else:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            idx = json.load(f)
        for fname in sorted(set(idx["weight_map"].values())):
            part, _ = read_safetensors(os.path.join(folder, fname))
            for k, v in part.items():
                if idx["weight_map"].get(k) != fname:
                    raise ValueError("tensor %s not mapped to %s" % (k, fname))
                sd[k] = v
        missing = set(idx["weight_map"]) - set(sd)
        if missing:
            raise ValueError("index lists tensors not in shards: %s" % sorted(missing))
    return cfg, sd


def extend_cache(cache, layer, k, v):
    """Layer's keys and values [heads, positions, hd] after the cached ones; stored back
    into cache (a list, a slot a layer) when there is one."""
    if cache is None:
        return k, v
    if cache[layer] is not None:
        k = torch.cat([cache[layer][0], k], dim=1)
        v = torch.cat([cache[layer][1], v], dim=1)
    cache[layer] = (k, v)
    return k, v


# --------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _normalize_gpt2_keys(sd):
    out = {}
    for k, v in sd.items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue  # stored causal-mask buffers, not parameters
        out[k] = v
    lm = out.pop("lm_head.weight", None)
    if lm is not None and not torch.equal(lm, out["wte.weight"]):
        raise ValueError("GPT-2 lm_head.weight differs from wte.weight")
    return out


class GPT2Ref:
    """variant (for diagnosing a mismatch, never for the reference itself):
    gelu='erf' uses exact GELU; eps=... overrides layer_norm_epsilon;
    no_pos=True drops wpe."""

    def __init__(self, cfg, sd, dtype=torch.float32, variant=None):
        self.variant = variant = dict(variant or {})
        self.cfg = cfg
        self.w = {k: v.to(dtype) for k, v in _normalize_gpt2_keys(sd).items()}
        self.n_layer = cfg["n_layer"]
        self.n_head = cfg["n_head"]
        self.d = cfg["n_embd"]
        self.hd = self.d // self.n_head
        self.eps = variant.get("eps", cfg.get("layer_norm_epsilon", 1e-5))
        self.act = gelu_new if variant.get("gelu", "tanh") == "tanh" else torch.nn.functional.gelu
        self.ctx = cfg.get("n_positions", cfg.get("n_ctx"))
        self.vocab = cfg["vocab_size"]
        self.dtype = dtype
        self.head = self.w["wte.weight"]  # tied

    def new_cache(self):
        return [None] * self.n_layer

    def _ln(self, x, p):
        return torch.nn.functional.layer_norm(x, (self.d,), self.w[p + ".weight"], self.w[p + ".bias"], self.eps)

    def _conv1d(self, x, p):  # HF Conv1D: weight [in, out]
        return x @ self.w[p + ".weight"] + self.w[p + ".bias"]

    def forward(self, ids, cache=None, start=0):
        """ids: list of ints at positions start..; returns logits [len(ids), V].
        cache (list per layer of (k, v) [H, S, hd]) is extended in place."""
        w = self.w
        T = len(ids)
        ids_t = torch.tensor(ids, dtype=torch.long)
        pos = torch.arange(start, start + T)
        x = w["wte.weight"][ids_t]
        if not self.variant.get("no_pos"):
            x = x + w["wpe.weight"][pos]
        for l in range(self.n_layer):
            p = "h.%d." % l
            h = self._ln(x, p + "ln_1")
            qkv = self._conv1d(h, p + "attn.c_attn")
            q, k, v = qkv.split(self.d, dim=-1)
            q = q.view(T, self.n_head, self.hd).transpose(0, 1)
            k = k.view(T, self.n_head, self.hd).transpose(0, 1)
            v = v.view(T, self.n_head, self.hd).transpose(0, 1)
            k, v = extend_cache(cache, l, k, v)
            S = k.shape[1]
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            # query i (absolute start+i) sees keys j <= start+i
            mask = torch.arange(S).view(1, S) <= torch.arange(start, start + T).view(T, 1)
            att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
            att = torch.softmax(att, dim=-1)
            o = (att @ v).transpose(0, 1).reshape(T, self.d)
            x = x + self._conv1d(o, p + "attn.c_proj")
            h = self._ln(x, p + "ln_2")
            x = x + self._conv1d(self.act(self._conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        x = self._ln(x, "ln_f")
        return x @ self.head.t()


# --------------------------------------------------------------------------
# Llama
# --------------------------------------------------------------------------


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def llama3_inv_freq(inv_freq, rs):
    """Llama 3's rope_scaling ("rope_type": "llama3") applied to inv_freq, as
    the model card's reference describes it: wavelengths longer than
    original_max_position_embeddings / low_freq_factor are slowed by `factor`,
    shorter than .. / high_freq_factor kept, and the band between interpolated
    linearly in original_max_position_embeddings / wavelength."""
    factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs["original_max_position_embeddings"]
    out = []
    for f in inv_freq.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / hi:
            out.append(f)
        elif wavelen > old / lo:
            out.append(f / factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=inv_freq.dtype)


class LlamaRef:
    """Llama and its relatives: Mistral (model_type "mistral": query i sees
    keys i-sliding_window+1 .. i only) and Qwen2 ("qwen2": q/k/v projections
    with biases). Llama 3's rope_scaling is applied when the config has it.

    variant (for diagnosing a mismatch, never for the reference itself):
    rope='interleaved' rotates (2i, 2i+1) pairs (GPT-J/Meta style) instead of
    rotate-half; rope='none' skips rotary; gqa='mod' maps query head h to kv
    head h % n_kv; eps=/theta= override the config; head='embed'/'lm_head'
    forces the output matrix; head_dim=... overrides head_dim."""

    def __init__(self, cfg, sd, dtype=torch.float32, variant=None):
        self.variant = variant = dict(variant or {})
        self.cfg = cfg
        self.w = {k: v.to(dtype) for k, v in sd.items()}
        self.n_layer = cfg["num_hidden_layers"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.d = cfg["hidden_size"]
        self.hd = variant.get("head_dim", cfg.get("head_dim") or self.d // self.nh)
        self.eps = variant.get("eps", cfg.get("rms_norm_eps", 1e-6))
        self.theta = variant.get("theta", cfg.get("rope_theta", 10000.0))
        self.ctx = cfg.get("max_position_embeddings", 2048)
        self.vocab = cfg["vocab_size"]
        self.dtype = dtype
        if cfg.get("tie_word_embeddings", False):
            if "lm_head.weight" in self.w and not torch.equal(self.w["lm_head.weight"], self.w["model.embed_tokens.weight"]):
                raise ValueError("tied head but lm_head.weight differs from embed_tokens")
            self.head = self.w["model.embed_tokens.weight"]
        else:
            self.head = self.w["lm_head.weight"]
        if variant.get("head") == "embed":
            self.head = self.w["model.embed_tokens.weight"]
        elif variant.get("head") == "lm_head":
            self.head = self.w["lm_head.weight"]
        # inv_freq as HF computes it (float32, positions multiplied in float32);
        # in float64 mode everything is float64 (for the exactness self-check)
        rd = torch.float64 if dtype == torch.float64 else torch.float32
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).to(rd) / self.hd))
        rs = cfg.get("rope_scaling")
        if rs and not variant.get("no_rope_scaling"):
            if rs.get("rope_type", rs.get("type")) != "llama3":
                raise ValueError("rope_scaling %r" % rs)
            self.inv_freq = llama3_inv_freq(self.inv_freq, rs)
        self.window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
        if variant.get("no_window"):
            self.window = None
        self.qkv_bias = cfg["model_type"] == "qwen2" and not variant.get("no_bias")

    def new_cache(self):
        return [None] * self.n_layer

    def _rms(self, x, p):
        xf = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        var = xf.pow(2).mean(-1, keepdim=True)
        xf = xf * torch.rsqrt(var + self.eps)
        return self.w[p] * xf.to(x.dtype)

    def _proj(self, h, p):
        y = h @ self.w[p + ".weight"].t()
        return y + self.w[p + ".bias"] if self.qkv_bias else y

    def rope(self, positions):
        freqs = torch.outer(positions.to(self.inv_freq.dtype), self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    def _rotate(self, x, cos, sin):
        style = self.variant.get("rope", "half")
        if style == "none":
            return x
        if style == "interleaved":
            h = self.hd // 2
            c, s = cos[..., :h], sin[..., :h]
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).flatten(-2)
        return x * cos + rotate_half(x) * sin

    def forward(self, ids, cache=None, start=0):
        w = self.w
        T = len(ids)
        x = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
        cos, sin = self.rope(torch.arange(start, start + T))
        group = self.nh // self.nkv
        for l in range(self.n_layer):
            p = "model.layers.%d." % l
            h = self._rms(x, p + "input_layernorm.weight")
            q, k, v = (self._proj(h, p + "self_attn.%s_proj" % n) for n in "qkv")
            q = q.view(T, self.nh, self.hd).transpose(0, 1)
            k = k.view(T, self.nkv, self.hd).transpose(0, 1)
            v = v.view(T, self.nkv, self.hd).transpose(0, 1)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            k, v = extend_cache(cache, l, k, v)
            S = k.shape[1]
            if self.variant.get("gqa") == "mod":
                k, v = k.repeat(group, 1, 1), v.repeat(group, 1, 1)
            else:  # query head h uses kv head h // group
                k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            key_pos, query_pos = torch.arange(S).view(1, S), torch.arange(start, start + T).view(T, 1)
            mask = key_pos <= query_pos
            if self.window:  # Mistral: only the last `window` positions, the query's own included
                mask &= key_pos > query_pos - self.window
            att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
            att = torch.softmax(att, dim=-1)
            o = (att @ v).transpose(0, 1).reshape(T, self.nh * self.hd)
            x = x + o @ w[p + "self_attn.o_proj.weight"].t()
            h = self._rms(x, p + "post_attention_layernorm.weight")
            g = h @ w[p + "mlp.gate_proj.weight"].t()
            u = h @ w[p + "mlp.up_proj.weight"].t()
            x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].t()
        x = self._rms(x, "model.norm.weight")
        return x @ self.head.t()


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def make_model(cfg, sd, dtype=torch.float32, variant=None):
    if cfg["model_type"] == "gpt2":
        return GPT2Ref(cfg, sd, dtype, variant)
    if cfg["model_type"] in ("llama", "mistral", "qwen2"):
        return LlamaRef(cfg, sd, dtype, variant)
    raise ValueError("model_type " + str(cfg["model_type"]))


EMBEDDINGS = ("wte.weight", "wpe.weight", "transformer.wte.weight", "transformer.wpe.weight",
              "model.embed_tokens.weight")


def bf16_weights_model(cfg, sd):
    """The model as a 'bf16 weights, f32 activations' engine sees it: every
    matrix of a matrix product (Linear/Conv1D weights and the output head)
    rounded to bf16; embedding lookups, norms and biases left as stored."""
    sd16 = {k: _bf16(v) if (v.dim() == 2 and k not in EMBEDDINGS) else v for k, v in sd.items()}
    m = make_model(cfg, sd16)
    m.head = _bf16(m.head)
    return m


def _bf16(t):
    return round_to_dtype(t, "BF16")


def load_model(folder, dtype=torch.float32):
    cfg, sd = load_checkpoint(folder)
    return make_model(cfg, sd, dtype)


@torch.no_grad()
def prefill_logits(model, ids):
    return model.forward(list(ids))


@torch.no_grad()
def greedy(model, ids, n, use_cache=True):
    """Greedy continuation of `ids` for n tokens (no EOS stop).
    Returns (new_ids, margins): margins[i] = top1 - top2 logit at step i."""
    ids = list(ids)
    out, margins = [], []
    if use_cache:
        cache = model.new_cache()
        logits = model.forward(ids, cache, 0)[-1]
        pos = len(ids)
    for i in range(n):
        if not use_cache:
            logits = model.forward(ids + out)[-1]
        top2 = torch.topk(logits, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        nxt = int(top2.indices[0])
        out.append(nxt)
        if use_cache and i + 1 < n:
            logits = model.forward([nxt], cache, pos)[-1]
            pos += 1
    return out, margins
