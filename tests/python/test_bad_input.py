#!/usr/bin/python3
"""pdlab on bad input: every case must exit with code 2 (not 0, not a signal,
not another code) and print a short message on stderr containing a keyword.

    /usr/bin/python3 tests/python/test_bad_input.py --pdlab build/src/pdlab/pdlab [--only NAME[,..]] [--list]

Also fails a case whose stderr contains 'terminate called', 'Segmentation',
'Aborted', 'core dumped' or a sanitizer report. A message of more than 4
non-empty lines is noted ("long message") but not failed.

Keywords (case-insensitive regular expressions; one must occur in stderr):

  case                   command   keyword regex
  missing_folder         info      not found|no such|does not exist|missing|cannot open
  no_config              info      config\\.json
  config_not_json        info      (?<!config\\.)json|parse|syntax   ("config.json" alone does not count)
  config_bad_model_type  info      model_type
  config_bad_kv_heads    info      head
  no_safetensors         info      safetensors
  truncated_data         info      truncat|past the end|beyond|exceeds|too short|out of bounds
  header_len_past_end    info      header|truncat|past the end|beyond|exceeds
  header_bad_json        info      header|json
  offsets_past_end       info      truncat|past the end|beyond|exceeds|out of bounds|offset
  offsets_size_mismatch  info      size|shape|offset|bytes
  dtype_f64              info      dtype
  dtype_i8               info      dtype
  shape_mismatch         info      shape
  missing_tensor_llama   info      missing|not found|no tensor|has no
  missing_tensor_gpt2    info      missing|not found|no tensor|has no
  missing_shard          info      not found|no such|missing|cannot open
  prompt_too_long        logits    context
  prompt_too_long_gen    generate  context
  token_out_of_range     logits    out of range|vocab
  token_negative         logits    negative|out of range|invalid|vocab
  prompt_not_numbers     logits    prompt|integer|number|invalid
  prompt_empty           logits    prompt|empty
  n_negative             generate  -n|-3|tokens|negative
  temperature_negative   generate  temperature
  top_p_2                generate  top-p|top_p
  precision_fp8          logits    precision|fp8
  threads_0              generate  threads
  unknown_option         generate  frobnicate
  unknown_command        -         frobnicate|command|usage
  device_cuda            generate  cuda|gpu      (skipped when this machine has an NVIDIA GPU)
  lab14_device_cuda      lab 14    cuda|gpu      (skipped with a GPU, or when lab 14 is not built)
  lab14_device_unknown   lab 14    device
  lab15_*                lab 15    --device cuda (CPU only), a GPT-2 model and a sliding window
                                   (gpt2|sliding window), --steps 0, more steps than the context
  draft_vocab_mismatch   generate  vocabulary|vocab   (--draft tiny-draft: 1497 ids against 320)
  speculate_0            generate  speculate|at least 1
  speculate_past_context generate  context      (--speculate 40 on a 32-position model)
  speculate_no_draft     generate  draft
  rope_type_*, sliding_window_*, qwen2_*, hidden_act_gelu, llama_attention_bias, partial_rotary
                         info      config.json keys that change the math, refused by name (the key)
  qwen2_bias_*           info      a q/k/v bias tensor missing or of the wrong shape (its name)
  mistral_window_device_cuda generate  sliding|cuda|gpu
  bench_precision_list_* bench     --precision f32,fp8 (fp8), bf16,f32,bf16 (twice), f32,,int8 (empty)
  bench_group_size_no_int8 bench   --group-size with no int8 in --precision (group-size.*int8)
  bench_turns_cuda       bench     several precisions with --device cuda (cpu only; also with a GPU)
  bench_turns_gen_0      bench     several precisions with --gen 0 (--gen)
  int4_device_cuda       generate  --precision int4 --device cuda (CPU only; the same with a GPU)
  int4_group_size_48     generate  --precision int4 --group-size 48 (group-size)
  serve_*                serve-sim a malformed trace line, an unknown key, a request longer than
                                   the context, a token budget of 0, an unknown --engine, a bad
                                   --goodput or --output-len; the paged KV pool: --block-size 0,
                                   --kv-blocks 0, more blocks or MiB than memory, MiB holding no
                                   block, a request needing more blocks than the pool; speculation:
                                   --speculative-k -1 or a word, --ngram-min past --ngram-max,
                                   --ngram-max without --speculative-k
                         serve     an unknown --batching, --max-seqs 0, a --kv-blocks pool that cannot
                                   hold one whole-context request, --kv-blocks with --batching serial

In the --draft cases, @MODEL stands for the case's own checkpoint folder.

Hostile files (issue #19), all with `info`; `--list` prints each with its keyword:
  *_deep                 a 100,000-deep nested array in tokenizer.json (vocab, merges), config.json
                         or the safetensors header: refused by the parser's depth limit
  *_fifo, *_dir          config.json, model.safetensors, tokenizer.json, the shard index or a shard
                         replaced by a FIFO (must not hang) or a folder
  config_*, header_*, weight_map_number, tokenizer_vocab_id_string, tokenizer_merge_number
                         a wrong JSON type, a fraction or an integer past 32 bits where an integer
                         belongs
  shard_dotdot, shard_absolute, shard_symlink_escape
                         an index naming a valid shard outside the model folder

Every case also fails when stderr holds more than 2000 characters (a message
that echoes the untrusted input).

Prints PASS/FAIL/SKIP per case with the first stderr line seen and ends with
"N passed, M failed" (skips not counted); exit 0 only if none failed.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from needs_torch import skip_without_torch  # noqa: E402

skip_without_torch()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import hf_models  # noqa: E402
import make_checkpoint as mc  # noqa: E402
from case_options import case_parser, chosen_cases, pdlab_program  # noqa: E402

CRASH_TEXT = re.compile(r"terminate called|Segmentation|Aborted|core dumped|AddressSanitizer|"
                        r"UndefinedBehaviorSanitizer|runtime error:|Assertion .* failed|std::bad_alloc",
                        re.IGNORECASE)

MAX_STDERR = 2000  # a clear message is a line or two; more means the input was echoed

LLAMA = dict(vocab=320, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, ctx=32)
GPT2 = dict(vocab=300, hidden=32, layers=2, heads=2, ctx=32)


# ------------------------------------------------------------ checkpoint makers


def good_llama(d, dtype="F32", **kw):
    mc.make_checkpoint(d, "llama", dtype, seed=1, **dict(LLAMA, **kw))
    return d


def tensors_llama():
    cfg, t = mc.gen_weights("llama", 1, **LLAMA)
    return cfg, t


def write_raw(d, cfg, blob):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(blob)
    return d


def st_parts(d):
    """header dict, data bytes of a good llama checkpoint written at d."""
    cfg, t = tensors_llama()
    header, data = hf_models.build_safetensors([(n, x, "F32") for n, x in t])
    return cfg, header, data


def mk_missing_folder(d):
    return os.path.join(d, "nowhere")


def without(name, **kw):
    """A good Llama checkpoint (kw: good_llama's) with its file `name` removed."""
    def f(d):
        good_llama(d, **kw)
        os.remove(os.path.join(d, name))
        return d
    return f


def mk_config_not_json(d):
    good_llama(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"model_type": "llama", "hidden_size": 64,,, this is not json')
    return d


def edit_config(d, **changes):
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    cfg.update(changes)
    json.dump(cfg, open(p, "w"))
    return d


def mk_bad_model_type(d):
    return edit_config(good_llama(d), model_type="bert")


def good_family(family, **kw):
    def f(d):
        mc.make_checkpoint(d, family, "F32", seed=1, **dict(LLAMA, **kw))
        return d
    return f


def qwen2_tensor_edit(name, edit):
    """A Qwen2 checkpoint whose tensor `name` is edited by `edit` (None: left out)."""
    def f(d):
        cfg, t = mc.gen_weights("qwen2", 1, **LLAMA)
        t = [(n, edit(x) if n == name else x) for n, x in t if n != name or edit(x) is not None]
        mc.write_checkpoint(d, cfg, t, "F32")
        return d
    return f


def mk_bad_kv_heads(d):
    return edit_config(good_llama(d), num_key_value_heads=3)


def mk_truncated_data(d):
    good_llama(d)
    p = os.path.join(d, "model.safetensors")
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - 1000)  # cuts into the last tensor's data
    return d


def mk_header_len_past_end(d):
    cfg, header, data = st_parts(d)
    blob = bytearray(hf_models.serialize_safetensors(header, data))
    blob[:8] = struct.pack("<Q", len(blob) + 4096)
    return write_raw(d, cfg, bytes(blob))


def mk_header_bad_json(d):
    cfg, header, data = st_parts(d)
    blob = bytearray(hf_models.serialize_safetensors(header, data))
    (n,) = struct.unpack("<Q", blob[:8])
    bad = b'{"model.embed_tokens.weight": {"dtype": "F32", "shape": [320, 64], oops'
    blob[8:8 + n] = bad + b" " * (n - len(bad))
    return write_raw(d, cfg, bytes(blob))


def mk_offsets_past_end(d):
    cfg, header, data = st_parts(d)
    # move one tensor's span (right size for its shape) beyond the data section
    e = header["model.layers.0.mlp.up_proj.weight"]
    b0, e0 = e["data_offsets"]
    e["data_offsets"] = [len(data) + 64, len(data) + 64 + (e0 - b0)]
    return write_raw(d, cfg, hf_models.serialize_safetensors(header, data))


def mk_offsets_size_mismatch(d):
    cfg, header, data = st_parts(d)
    # span inside the file but 4 bytes short of what shape x dtype needs
    e = header["model.layers.1.input_layernorm.weight"]
    e["data_offsets"] = [e["data_offsets"][0], e["data_offsets"][1] - 4]
    return write_raw(d, cfg, hf_models.serialize_safetensors(header, data))


def mk_offsets_overlap(d):
    # the case: a tensor's range starts inside the earlier one's
    cfg, header, data = st_parts(d)
    first = header["model.layers.0.input_layernorm.weight"]
    later = header["model.layers.1.input_layernorm.weight"]  # same shape, further into the data
    n = later["data_offsets"][1] - later["data_offsets"][0]
    later["data_offsets"] = [first["data_offsets"][0] + 4, first["data_offsets"][0] + 4 + n]
    return write_raw(d, cfg, hf_models.serialize_safetensors(header, data))


def mk_offsets_hole(d):
    # an extra 16 bytes at the very end that no tensor claims
    cfg, header, data = st_parts(d)
    return write_raw(d, cfg, hf_models.serialize_safetensors(header, data + bytes(16)))


def mk_dtype(dt, elem):
    def f(d):
        cfg, t = tensors_llama()
        name = "model.layers.0.post_attention_layernorm.weight"
        t = dict(t)
        x = t.pop(name)
        if dt == "F64":
            raw = x.double().numpy().astype("<f8").tobytes()
        else:
            raw = np.clip(np.round(x.numpy() * 64), -128, 127).astype(np.int8).tobytes()
        assert len(raw) == x.numel() * elem
        header, data = hf_models.build_safetensors([(n, v, "F32") for n, v in t.items()],
                                                   raw={name: (dt, list(x.shape), raw)})
        return write_raw(d, cfg, hf_models.serialize_safetensors(header, data))
    return f


def mk_shape_mismatch(d):
    # weights written for hidden 64; config claims 96 (heads 4 -> head_dim 24)
    return edit_config(good_llama(d), hidden_size=96)


def mk_missing_tensor_llama(d):
    cfg, t = tensors_llama()
    t = [(n, x) for n, x in t if n != "model.layers.1.mlp.down_proj.weight"]
    mc.write_checkpoint(d, cfg, t, "F32")
    return d


def mk_missing_tensor_gpt2(d):
    cfg, t = mc.gen_weights("gpt2", 1, **GPT2)
    t = [(n, x) for n, x in mc.gpt2_names(cfg, t, "prefixed") if n != "transformer.h.1.attn.c_proj.bias"]
    mc.write_checkpoint(d, cfg, t, "F16")
    return d


# ---------------------------------------------- hostile files (issue #19)

DEEP = 100000  # levels of nesting: far past the parser's limit, and past a recursive dump()'s stack
SHARD2 = "model-00002-of-00002.safetensors"


def deep_array():
    return "[" * DEEP + "]" * DEEP


def tiny_tokenizer_json(vocab="", merges=""):
    """A byte-level BPE tokenizer.json as text; `vocab`/`merges` are raw JSON spliced in as extra entries."""
    entries = ['"%s": %d' % (c, i) for i, c in enumerate("abcdefgh")]
    return ('{"model": {"type": "BPE", "vocab": {%s%s}, "merges": ["a b"%s]},'
            ' "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}'
            % (", ".join(entries + ['"ab": 8']), vocab, merges))


def with_tokenizer(text):
    def f(d):
        good_llama(d)
        with open(os.path.join(d, "tokenizer.json"), "w") as fh:
            fh.write(text)
        return d
    return f


def with_tokenizer_config(text):
    def f(d):
        with_tokenizer(tiny_tokenizer_json())(d)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            fh.write(text)
        return d
    return f


def raw_config_text(d, text):
    good_llama(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(text)
    return d


def mk_config_deep(d):
    return raw_config_text(d, '{"model_type": "llama", "nested": %s}' % deep_array())


def mk_config_huge_int(d):
    # 2^32 + 256: a 32-bit truncation reads it as 256
    return raw_config_text(d, json.dumps(dict(json.load(open(good_llama(d) + "/config.json")),
                                              hidden_size=2**32 + 256)))


def header_with(d, edit):
    """A llama checkpoint whose safetensors header is edited as JSON text by `edit`."""
    cfg, header, data = st_parts(d)
    text = edit(json.dumps(header)).encode()
    return write_raw(d, cfg, struct.pack("<Q", len(text)) + text + data)


def mk_header_deep(d):
    return header_with(d, lambda h: h[:-1] + ', "deep": %s}' % deep_array())


def edit_header_entry(d, **changes):
    cfg, header, data = st_parts(d)
    header["model.norm.weight"].update(changes)
    return write_raw(d, cfg, hf_models.serialize_safetensors(header, data))


def replace_with(kind, name, shards=0):
    """A good checkpoint whose file `name` is replaced by a FIFO or a folder."""
    def f(d):
        good_llama(d, shards=shards) if shards else with_tokenizer(tiny_tokenizer_json())(d)
        p = os.path.join(d, name)
        os.remove(p)
        os.mkfifo(p) if kind == "fifo" else os.mkdir(p)
        return d
    return f


def edit_index(d, edit):
    good_llama(d, shards=2)
    p = os.path.join(d, "model.safetensors.index.json")
    index = json.load(open(p))
    edit(d, index["weight_map"])
    json.dump(index, open(p, "w"))
    return d


def move_shard2(d, weight_map, new_name, target):
    """Moves shard 2 to `target` (a valid file, so only confinement can refuse it) and names it new_name."""
    os.rename(os.path.join(d, SHARD2), target)
    for k, v in weight_map.items():
        if v == SHARD2:
            weight_map[k] = new_name


def outside(d):
    o = d + "_outside"
    os.makedirs(o, exist_ok=True)
    return o


def mk_shard_dotdot(d):
    return edit_index(d, lambda d, m: move_shard2(d, m, "../%s/x.safetensors" % os.path.basename(outside(d)),
                                                   os.path.join(outside(d), "x.safetensors")))


def mk_shard_absolute(d):
    target = os.path.join(outside(d), "x.safetensors")
    return edit_index(d, lambda d, m: move_shard2(d, m, target, target))


def mk_shard_symlink(d):
    def edit(d, m):
        target = os.path.join(outside(d), "x.safetensors")
        move_shard2(d, m, "link.safetensors", target)
        os.symlink(target, os.path.join(d, "link.safetensors"))
    return edit_index(d, edit)


def mk_weight_map_number(d):
    return edit_index(d, lambda d, m: m.update({"model.norm.weight": 5}))


IDS = "1,2,3,4,5"
CTX, VOCAB = LLAMA["ctx"], LLAMA["vocab"]

# name, maker, command, extra args, keyword regex
CASES = [
    ("missing_folder", mk_missing_folder, "info", [], r"not found|no such|does not exist|missing|cannot open"),
    ("no_config", without("config.json"), "info", [], r"config\.json"),
    ("config_not_json", mk_config_not_json, "info", [], r"(?<!config\.)json|parse|syntax"),
    ("config_bad_model_type", mk_bad_model_type, "info", [], r"model_type"),
    ("config_bad_kv_heads", mk_bad_kv_heads, "info", [], r"head"),
    ("no_safetensors", without("model.safetensors"), "info", [], r"safetensors"),
    ("truncated_data", mk_truncated_data, "info", [], r"truncat|past the end|beyond|exceeds|too short|out of bounds"),
    ("header_len_past_end", mk_header_len_past_end, "info", [], r"header|truncat|past the end|beyond|exceeds"),
    ("header_bad_json", mk_header_bad_json, "info", [], r"header|json"),
    ("offsets_past_end", mk_offsets_past_end, "info", [],
     r"truncat|past the end|beyond|exceeds|out of bounds|offset"),
    ("offsets_size_mismatch", mk_offsets_size_mismatch, "info", [], r"size|shape|offset|bytes"),
    ("offsets_overlap", mk_offsets_overlap, "info", [], r"model\.layers\.0\.input_layernorm.*overlap"),
    ("offsets_overlap_gen", mk_offsets_overlap, "generate", [], r"overlap"),
    ("offsets_trailing_bytes", mk_offsets_hole, "info", [], r"16 bytes .*belong to no tensor"),
    ("dtype_f64", mk_dtype("F64", 8), "info", [], r"dtype"),
    ("dtype_i8", mk_dtype("I8", 1), "info", [], r"dtype"),
    ("shape_mismatch", mk_shape_mismatch, "info", [], r"shape"),
    ("missing_tensor_llama", mk_missing_tensor_llama, "info", [], r"missing|not found|no tensor|has no"),
    ("missing_tensor_gpt2", mk_missing_tensor_gpt2, "info", [], r"missing|not found|no tensor|has no"),
    ("missing_shard", without("model-00002-of-00002.safetensors", shards=2), "info", [],
     r"not found|no such|missing|cannot open"),
    ("prompt_too_long", good_llama, "logits", ["--prompt-ids", ",".join(["7"] * (CTX + 1))], r"context"),
    ("prompt_too_long_gen", good_llama, "generate", ["--prompt-ids", ",".join(["7"] * (CTX + 1))], r"context"),
    ("token_out_of_range", good_llama, "logits", ["--prompt-ids", "1,2,%d,4" % VOCAB], r"out of range|vocab"),
    ("token_negative", good_llama, "logits", ["--prompt-ids", "1,-1,2"], r"negative|out of range|invalid|vocab"),
    ("prompt_not_numbers", good_llama, "logits", ["--prompt-ids", "1,two,3"], r"prompt|integer|number|invalid"),
    ("prompt_empty", good_llama, "logits", ["--prompt-ids", ""], r"prompt|empty"),
    ("n_negative", good_llama, "generate", ["-n", "-3"], r"-n|-3|tokens|negative"),
    ("temperature_negative", good_llama, "generate", ["--temperature", "-1"], r"temperature"),
    ("top_p_2", good_llama, "generate", ["--top-p", "2"], r"top-p|top_p"),
    ("precision_fp8", good_llama, "logits", ["--precision", "fp8"], r"precision|fp8"),
    ("threads_0", good_llama, "generate", ["--threads", "0"], r"threads"),
    ("unknown_option", good_llama, "generate", ["--frobnicate"], r"frobnicate"),
    ("unknown_command", good_llama, "frobnicate", [], r"frobnicate|command|usage"),
    ("device_cuda", good_llama, "generate", ["--device", "cuda"], r"cuda|gpu"),
    # speculative decoding (issue #17)
    ("draft_vocab_mismatch", good_llama, "generate", ["--draft", "tiny-draft", "--speculate", "2"], r"vocabulary|vocab"),
    ("speculate_0", good_llama, "generate", ["--draft", "@MODEL", "--speculate", "0"], r"speculate|at least 1"),
    ("speculate_past_context", good_llama, "generate", ["--draft", "@MODEL", "--speculate", "40"], r"context"),
    ("speculate_no_draft", good_llama, "generate", ["--speculate", "3"], r"draft"),
    # hostile files (issue #19): deep nesting, non-regular files, wrong types, narrowing, shard escapes
    ("tokenizer_deep_vocab", with_tokenizer(tiny_tokenizer_json(vocab=', "z": ' + deep_array())), "info", [],
     r"nest|deep"),
    ("tokenizer_deep_merges", with_tokenizer(tiny_tokenizer_json(merges=", " + deep_array())), "info", [],
     r"nest|deep"),
    ("config_deep", mk_config_deep, "info", [], r"nest|deep"),
    ("header_deep", mk_header_deep, "info", [], r"nest|deep"),
    ("config_fifo", replace_with("fifo", "config.json"), "info", [], r"fifo|pipe|regular"),
    ("safetensors_fifo", replace_with("fifo", "model.safetensors"), "info", [], r"fifo|pipe|regular"),
    ("tokenizer_fifo", replace_with("fifo", "tokenizer.json"), "info", [], r"fifo|pipe|regular"),
    ("index_fifo", replace_with("fifo", "model.safetensors.index.json", shards=2), "info", [], r"fifo|pipe|regular"),
    ("shard_fifo", replace_with("fifo", SHARD2, shards=2), "info", [], r"fifo|pipe|regular"),
    ("config_dir", replace_with("dir", "config.json"), "info", [], r"folder|director|regular"),
    ("safetensors_dir", replace_with("dir", "model.safetensors"), "info", [], r"folder|director|regular"),
    ("tokenizer_dir", replace_with("dir", "tokenizer.json"), "info", [], r"folder|director|regular"),
    ("index_dir", replace_with("dir", "model.safetensors.index.json", shards=2), "info", [],
     r"folder|director|regular"),
    ("shard_dir", replace_with("dir", SHARD2, shards=2), "info", [], r"folder|director|regular"),
    ("config_model_type_number", lambda d: edit_config(good_llama(d), model_type=5), "info", [], r"model_type"),
    ("config_hidden_size_string", lambda d: edit_config(good_llama(d), hidden_size="64"), "info", [],
     r"hidden_size"),
    ("config_eos_object", lambda d: edit_config(good_llama(d), eos_token_id={"id": 2}), "info", [],
     r"eos_token_id"),
    ("config_tie_string", lambda d: edit_config(good_llama(d), tie_word_embeddings="yes"), "info", [],
     r"tie_word_embeddings"),
    ("config_hidden_size_2p32", mk_config_huge_int, "info", [], r"hidden_size"),
    ("config_kv_heads_fraction", lambda d: edit_config(good_llama(d), num_key_value_heads=2.5), "info", [],
     r"num_key_value_heads"),
    ("weight_map_number", mk_weight_map_number, "info", [], r"weight_map"),
    ("header_dtype_number", lambda d: edit_header_entry(d, dtype=32), "info", [], r"dtype"),
    ("header_shape_string", lambda d: edit_header_entry(d, shape="64"), "info", [], r"shape"),
    ("header_offsets_fraction", lambda d: edit_header_entry(d, data_offsets=[0.5, 256]), "info", [],
     r"data_offsets"),
    ("tokenizer_vocab_id_string", with_tokenizer(tiny_tokenizer_json(vocab=', "z": "9"')), "info", [],
     r"vocab|id"),
    ("tokenizer_merge_number", with_tokenizer(tiny_tokenizer_json(merges=", 7")), "info", [], r"merge"),
    ("tokenizer_unknown_normalizer",
     with_tokenizer(tiny_tokenizer_json()[:-1] + ', "normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}}'),
     "info", [], r'normalizer "Precompiled" is not supported'),
    ("tokenizer_config_split_special", with_tokenizer_config('{"split_special_tokens": true}'), "info", [],
     r"split_special_tokens"),
    ("shard_dotdot", mk_shard_dotdot, "info", [], r"outside|inside|folder"),
    ("shard_absolute", mk_shard_absolute, "info", [], r"outside|inside|folder"),
    ("shard_symlink_escape", mk_shard_symlink, "info", [], r"outside|inside|folder"),
]


def with_trace(*lines):
    """The good checkpoint, with trace.jsonl (these lines) in its folder for serve-sim."""
    def mk(d):
        good_llama(d)
        with open(os.path.join(d, "trace.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return d
    return mk


GOOD_LINE = '{"id": 0, "arrival_s": 0, "prompt_ids": [1, 2, 3], "max_tokens": 2}'
# Config keys that change the math: implemented or refused by name (src/io/config.cpp).
QWEN_BIAS = "model.layers.1.self_attn.k_proj.bias"
CASES += [
    ("rope_type_yarn", lambda d: edit_config(good_llama(d), rope_scaling={"rope_type": "yarn", "factor": 4.0}),
     "info", [], r"rope_type.*yarn"),
    ("rope_type_linear_old_key", lambda d: edit_config(good_llama(d), rope_scaling={"type": "linear", "factor": 2}),
     "info", [], r"rope_type.*linear"),
    ("rope_llama3_no_original", lambda d: edit_config(good_llama(d), rope_scaling={"rope_type": "llama3", "factor": 8}),
     "info", [], r"original_max_position_embeddings"),
    ("sliding_window_0", good_family("mistral", window=0), "info", [], r"sliding_window"),
    ("sliding_window_negative", good_family("mistral", window=-4), "info", [], r"sliding_window"),
    ("qwen2_use_sliding_window", lambda d: edit_config(good_family("qwen2")(d), use_sliding_window=True),
     "info", [], r"use_sliding_window"),
    ("qwen2_bias_missing", qwen2_tensor_edit(QWEN_BIAS, lambda x: None), "info", [], r"k_proj\.bias"),
    ("qwen2_bias_wrong_shape", qwen2_tensor_edit(QWEN_BIAS, lambda x: x[:-1]), "info", [], r"k_proj\.bias.*shape"),
    ("hidden_act_gelu", lambda d: edit_config(good_llama(d), hidden_act="gelu"), "info", [], r"hidden_act"),
    ("llama_attention_bias", lambda d: edit_config(good_llama(d), attention_bias=True), "info", [], r"attention_bias"),
    ("partial_rotary", lambda d: edit_config(good_family("mistral", window=8)(d), partial_rotary_factor=0.5),
     "info", [], r"partial_rotary_factor"),
    ("mistral_window_device_cuda", good_family("mistral", window=8), "generate", ["--device", "cuda"],
     r"sliding|cuda|gpu"),
]

CASES += [
    ("serve_trace_malformed", with_trace(GOOD_LINE, '{"id": 1, "prompt_ids": [1, 2'), "serve-sim", [],
     r"line 2"),
    ("serve_trace_unknown_key", with_trace('{"id": 1, "prompt_ids": [1], "max_token": 2}'), "serve-sim", [],
     r"unknown key"),
    ("serve_request_too_long", with_trace('{"id": 4, "prompt_ids": [%s], "max_tokens": 2}'
                                          % ",".join(["7"] * (CTX + 1))), "serve-sim", [], r"context"),
    ("serve_budget_0", good_llama, "serve-sim", ["--max-tokens-per-step", "0"], r"budget|tokens-per-step"),
    ("serve_engine_unknown", good_llama, "serve-sim", ["--engine", "pagd"], r"paged or slot"),
    ("serve_block_size_0", good_llama, "serve-sim", ["--block-size", "0"], r"block-size"),
    ("serve_kv_blocks_0", good_llama, "serve-sim", ["--kv-blocks", "0"], r"kv-blocks"),
    ("serve_kv_blocks_past_memory", good_llama, "serve-sim", ["--kv-blocks", "2000000000"],
     r"memory|fewer blocks"),
    ("serve_kv_mb_past_memory", good_llama, "serve-sim", ["--kv-mb", "900000000"], r"memory|KV bytes"),
    ("serve_kv_mb_no_block", good_llama, "serve-sim", ["--kv-mb", "0.0001"], r"no block"),
    ("serve_kv_too_few_for_request", with_trace('{"id": 3, "prompt_ids": [%s], "max_tokens": 2}'
                                                % ",".join(["7"] * 20)), "serve-sim",
     ["--kv-blocks", "1", "--block-size", "16"], r"blocks"),
    ("serve_goodput_bad", good_llama, "serve-sim", ["--goodput", "ttfb:5"], r"goodput"),
    ("serve_output_len_bad", good_llama, "serve-sim", ["--output-len", "gauss:3"], r"output-len"),
    ("serve_speculative_k_negative", good_llama, "serve-sim", ["--speculative-k", "-1"], r"speculative-k"),
    ("serve_speculative_k_word", good_llama, "serve-sim", ["--speculative-k", "four"], r"speculative-k"),
    ("serve_ngram_min_past_max", good_llama, "serve-sim",
     ["--speculative-k", "4", "--ngram-max", "2", "--ngram-min", "3"], r"ngram-min.*ngram-max|ngram-max"),
    ("serve_ngram_without_k", good_llama, "serve-sim", ["--ngram-max", "4"], r"ngram-max.*speculative-k"),
    # pdlab serve: each fails before it listens (a case that does not would run until --timeout)
    ("serve_batching_unknown", good_llama, "serve", ["--batching", "batched"], r"batching"),
    ("serve_max_seqs_0", good_llama, "serve", ["--max-seqs", "0"], r"max-seqs"),
    ("serve_kv_blocks_too_few", good_llama, "serve", ["--kv-blocks", "1", "--block-size", "4"], r"kv-blocks"),
    ("serve_kv_blocks_serial", good_llama, "serve", ["--batching", "serial", "--kv-blocks", "8"], r"kv-blocks"),
    # pdlab bench --precision A,B,...: decode steps in turns (issue 16); each refused before loading
    ("bench_precision_list_unknown", good_llama, "bench", ["--precision", "f32,fp8"], r"fp8"),
    ("bench_precision_list_repeated", good_llama, "bench", ["--precision", "bf16,f32,bf16"], r"twice"),
    ("bench_precision_list_empty_item", good_llama, "bench", ["--precision", "f32,,int8"], r"empty"),
    ("bench_group_size_no_int8", good_llama, "bench", ["--precision", "f32,bf16", "--group-size", "32"],
     r"group-size.*int8"),
    ("bench_turns_cuda", good_llama, "bench", ["--precision", "f32,bf16", "--device", "cuda"], r"cpu only"),
    ("bench_turns_gen_0", good_llama, "bench", ["--precision", "f32,int8", "--gen", "0"], r"--gen"),
    # int4, lab 12's stretch: the CPU only, the same group sizes as int8
    ("int4_device_cuda", good_llama, "generate", ["--precision", "int4", "--device", "cuda"], r"int4.*CPU only"),
    ("int4_group_size_48", good_llama, "generate", ["--precision", "int4", "--group-size", "48"], r"group-size"),
    # lab 07's program (skipped when it is not built): its own flags
    ("lab07_rate_too_low", good_llama, "lab07", ["--rate", "0.001"], r"rate"),
    ("lab07_block_size_0", good_llama, "lab07", ["--block-size", "0"], r"block-size"),
    ("lab07_prefix_past_context", good_llama, "lab07", ["--prefix-len", "100"], r"context"),
    ("lab07_question_len_bad", good_llama, "lab07", ["--question-len", "gauss:3"], r"question-len"),
    ("lab07_out_not_a_folder", good_llama, "lab07", ["--out", "/dev/null/lab07"], r"folder.*--out"),
    # lab 14's program (no model): --device cuda without a GPU or without the CUDA backend
    ("lab14_device_cuda", good_llama, "lab14", ["--device", "cuda"], r"cuda|gpu"),
    ("lab14_device_unknown", good_llama, "lab14", ["--device", "tpu"], r"device"),
    # lab 15's program: its forward is the CPU's, for the Llama family without a sliding window
    ("lab15_device_cuda", good_llama, "lab15", ["--device", "cuda"], r"CPU only"),
    ("lab15_gpt2", lambda d: (mc.make_checkpoint(d, "gpt2", "F32", seed=1, **GPT2), d)[1], "lab15", [],
     r"gpt2 model"),
    ("lab15_sliding_window", good_family("mistral", window=4), "lab15", [], r"sliding window"),
    ("lab15_steps_0", good_llama, "lab15", ["--steps", "0"], r"--steps"),
    ("lab15_past_context", good_llama, "lab15", ["--steps", "40", "--prompt", "a"], r"context"),
]

LAB_PROGRAMS = {
    "lab07": os.path.join("labs", "track2", "07-paged-kv-and-prefix-caching", "07-paged-kv-and-prefix-caching"),
    "lab14": os.path.join("labs", "track3", "14-attention-kernels", "14-attention-kernels"),
    "lab15": os.path.join("labs", "track4", "15-forward-pass", "15-forward-pass"),
}


def lab_program(pdlab, command):
    """The lab's program in the build folder that holds pdlab (build/src/pdlab/pdlab)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(pdlab))), LAB_PROGRAMS[command])


def has_nvidia_gpu():
    if os.path.exists("/dev/nvidia0"):
        return True
    try:
        return subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def build_cmd(pdlab, command, model, extra, work, name):
    if command == "frobnicate":
        return [pdlab, "frobnicate", "--model", model]
    if command == "lab07":  # a trace that fits the test model's 32 positions
        cmd = [lab_program(pdlab, command), "--model", model, "--quiet", "--no-plot", "--num-requests", "2"]
        for flag, value in (("--prefix-len", "4"), ("--question-len", "fixed:2"), ("--output-len", "fixed:1"),
                            ("--out", os.path.join(work, name + "_out"))):
            if flag not in extra:
                cmd += [flag, value]
        return cmd + extra
    if command == "lab14":  # the shortest run, were the case to get past its option checks
        return [lab_program(pdlab, command), "--no-plot", "--sweeps", "decode", "--lengths", "16",
                "--out", os.path.join(work, name + "_out")] + extra
    if command == "lab15":
        return [lab_program(pdlab, command), "--model", model] + extra
    cmd = [pdlab, command, "--model", model]
    has_ids = "--prompt-ids" in extra
    if command == "logits":
        cmd += ([] if has_ids else ["--prompt-ids", IDS]) + ["--out", os.path.join(work, name + ".npy")]
    elif command == "generate":
        cmd += ([] if has_ids else ["--prompt-ids", IDS]) + ["--greedy", "--json", os.path.join(work, name + ".json")]
        if "-n" not in extra:
            cmd += ["-n", "4"]
    elif command == "serve":
        cmd += ["--port", "0"]
    elif command == "serve-sim":
        trace = os.path.join(model, "trace.jsonl")
        cmd += ["--quiet"] + (["--trace", trace] if os.path.exists(trace) else ["--num-requests", "2", "--rate", "inf"])
        for flag, value in (("--prompt-len", "fixed:4"), ("--output-len", "fixed:2")):
            if flag not in extra and not os.path.exists(trace):
                cmd += [flag, value]
    return cmd + [model if x == "@MODEL" else x for x in extra]


def main():
    ap = case_parser(__doc__, timeout=60)
    ap.add_argument("--verbose", "-v", action="store_true", help="print the full stderr of each case")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cases = chosen_cases(CASES, a.only)
    if a.list:
        for c in cases:
            print("%-24s %-9s %s" % (c[0], c[2], c[4]))
        return
    pdlab = pdlab_program(a.pdlab)
    gpu = has_nvidia_gpu()
    n_ok = n_bad = 0
    with tempfile.TemporaryDirectory(prefix="pdlab_t_") as work:
        # a sanity run first: the good checkpoint must load, or every case is meaningless
        good = good_llama(os.path.join(work, "good"))
        p = subprocess.run([pdlab, "info", "--model", good], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=a.timeout)
        if p.returncode != 0:
            print("NOTE: the unmodified checkpoint fails too (exit %d): %s"
                  % (p.returncode, p.stderr.decode(errors="replace").strip()[:300]))
        for i, (name, maker, command, extra, kw) in enumerate(cases):
            if name in ("device_cuda", "lab14_device_cuda") and gpu:
                print("SKIP %s: this machine has an NVIDIA GPU" % name)
                continue
            if command in LAB_PROGRAMS and not os.access(lab_program(pdlab, command), os.X_OK):
                print("SKIP %s: the %s program is not built" % (name, command))
                continue
            # neutral folder names: a path echoed in a message must not supply the keyword
            d = os.path.join(work, "c%02d" % i)
            os.makedirs(d, exist_ok=True)
            model = maker(d)
            cmd = build_cmd(pdlab, command, model, extra, work, "c%02d" % i)
            problems = []
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=a.timeout)
                rc, err = p.returncode, p.stderr.decode(errors="replace")
            except subprocess.TimeoutExpired:
                rc, err = "timeout", ""
            lines = [l for l in err.splitlines() if l.strip()]
            if rc != 2:
                if isinstance(rc, int) and rc < 0:
                    problems.append("killed by signal %d" % -rc)
                else:
                    problems.append("exit %s, expected 2" % rc)
            if not lines:
                problems.append("empty stderr")
            if CRASH_TEXT.search(err):
                problems.append("crash text on stderr")
            if lines and not re.search(kw, err, re.IGNORECASE):
                problems.append("no keyword /%s/" % kw)
            if len(err) > MAX_STDERR:
                problems.append("%d characters on stderr: a message must not echo the input" % len(err))
            note = " (long message: %d lines)" % len(lines) if len(lines) > 4 else ""
            ok = not problems
            n_ok += ok
            n_bad += not ok
            first = lines[0] if lines else ""
            print("%s %s: %s%s%s" % ("PASS" if ok else "FAIL", name,
                                      "" if ok else "; ".join(problems) + " -- ", first[:300], note), flush=True)
            if a.verbose or not ok:
                if len(lines) > 1:
                    for l in lines[1:8]:
                        print("      | " + l[:300])
                if not ok:
                    print("      command: " + " ".join(cmd))
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(d + "_outside", ignore_errors=True)
    print("%d passed, %d failed" % (n_ok, n_bad))
    sys.exit(0 if n_bad == 0 else 1)


if __name__ == "__main__":
    main()
