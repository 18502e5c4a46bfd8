"""Write the model card README.md of an exported folder from its config.json and metrics.json.

  /usr/bin/python3 tools/train/model_card.py data/models/tiny [data/models/tiny-draft]
"""
import json
import os
import sys

INTRO = {
    "tiny": ("The main model of the lab kit: a very small Llama that writes simple English children's "
             "stories. It exists so that a student's first `pdlab generate --prompt \"Once upon a time\"` "
             "prints readable text without downloading anything. It only knows the little world of "
             "its training grammar (children, animals, parks, lost toys, storms, baking, kindness) and "
             "will produce odd sentences for prompts far outside it."),
    "tiny-draft": ("A smaller sibling of `tiny`, trained by the same script on the same corpus with the "
                   "*same tokenizer* (identical `tokenizer.json`, same ids), meant as the draft model for "
                   "speculative decoding with `tiny` as the target. It is faster and a little worse."),
}


def fmt_params(n):
    return f"{n:,}".replace(",", " ")


def card(folder):
    name = os.path.basename(os.path.normpath(folder))
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(folder, "metrics.json")) as f:
        m = json.load(f)
    size = os.path.getsize(os.path.join(folder, "model.safetensors"))
    if name == "tiny":
        cmd = ("/usr/bin/python3 tools/train/train.py --preset tiny --out data/models/tiny \\\n"
               "    --batch 8 --seq 256 --warmup 100 --eval-stories 500 --steps 1800 --eval-every 300\n"
               "/usr/bin/python3 tools/train/train.py --preset tiny --out data/models/tiny \\\n"
               "    --batch 8 --seq 256 --warmup 100 --eval-stories 500 --steps 2300 --min-lr 3e-5 "
               "--eval-every 250 --resume")
        sched = ("linear warmup (100 steps) then cosine decay from 3e-3 towards 3e-4 over 1800 steps; the run "
                 "was then resumed and stretched to 2300 steps with the floor lowered to 3e-5 (the LR is "
                 "continuous at the joint, about 3.6e-4, and ends at 3e-5), because the loss was still "
                 "falling fast as the LR came down")
    else:
        cmd = "/usr/bin/python3 tools/train/train.py " + " ".join(m["argv"])
        sched = "linear warmup (100 steps) then cosine decay from 3e-3 to 3e-4"
    hist = "\n".join(f"| {h['step']} | {h['train_loss']:.3f} | {h['eval_loss']:.3f} | {h['eval_bpb']:.3f} | "
                     f"{h['train_secs'] / 60:.1f} |" for h in m["history"])
    samples = "\n\n".join(f"**{s['prompt']}** ({s['mode']}):\n\n> {s['text']}" for s in m["samples"])
    with open(os.path.join(folder, "golden.json")) as f:
        golden = json.load(f)
    gold = "\n".join(f"| `{p['text']}` | {p['ids']} | `{p['greedy_text']!r}` |" for p in golden["prompts"])
    other = ("The draft model `tiny-draft` (same tokenizer) lives next to it in `data/models/tiny-draft`."
             if name == "tiny" else "The target model is `data/models/tiny`.")
    return f"""# {name}

{INTRO.get(name, "")}

{other}

## Files

| file | content |
|------|---------|
| `config.json` | Hugging Face Llama config (`LlamaForCausalLM`) |
| `model.safetensors` | weights, {c['torch_dtype']}, {size:,} bytes, HF tensor names, no `lm_head.weight` (tied) |
| `tokenizer.json` | byte-level BPE, Hugging Face format |
| `golden.json` | reference prompt ids, 32 greedy ids and top-5 logits (float32 PyTorch) for testing the C++ engine |
| `metrics.json` | loss curve, held-out numbers, samples and the training arguments |

## Shape

| | |
|---|---|
| architecture | Llama (pre-norm RMSNorm, RoPE "rotate half", GQA attention, SwiGLU MLP, no biases) |
| hidden size | {c['hidden_size']} |
| layers | {c['num_hidden_layers']} |
| query heads / KV heads | {c['num_attention_heads']} / {c['num_key_value_heads']} (head_dim {c['head_dim']}; query head h uses KV head h // {c['num_attention_heads'] // c['num_key_value_heads']}) |
| MLP intermediate size | {c['intermediate_size']} |
| vocabulary | {c['vocab_size']} |
| context (max_position_embeddings) | {c['max_position_embeddings']} (trained on sequences of {m['seq']}) |
| rope_theta / rms_norm_eps | {c['rope_theta']} / {c['rms_norm_eps']} |
| tied embeddings | yes |
| parameters | {fmt_params(m['parameters'])} |
| stored dtype | {c['torch_dtype']} |

## Training data and licence

The corpus is not scraped from anywhere: `tools/train/corpus.py` writes it
from a hand-made grammar with a fixed random seed. The stories are a few
sentences long, mostly begin with "Once upon a time", and follow one of six
plots (a lost object found with a friend's help, meeting a new friend,
helping an animal, cooking together, sheltering from a storm, reaching
the top of a tree as a team), with dialogue and a closing line or a moral.
Training used 60 000 stories from seed {m['seed']} (about 6.5 M tokens, of
which the model saw {m['train_tokens_seen'] / 1e6:.1f} M); the held-out set is 500
stories from seed {m['seed'] + 1000}, never seen in training.

**Licence:** the generated corpus, the tokenizer and these weights were made
by this project; the generated text is dedicated to the public domain under
CC0 1.0, and so may be freely redistributed.

## Tokenizer

GPT-2-style byte-level BPE learnt by `tools/train/bpe.py` on the first
20 000 training stories: GPT-2 pre-tokenizer regex, GPT-2 byte-to-character
table, merges applied lowest rank first. Id 0 is `<|endoftext|>` (a special
added token that also appears in the vocab); ids 1-256 are the 256 bytes;
ids 257 and up are the merges in order. The target was 2048 entries, but
the grammar's vocabulary ran out of pairs that occur at least twice at
{c['vocab_size']}. No BOS is ever added. In training, stories are separated by id 0,
and every training sequence starts at a story's first token, so a bare
prompt like "Once upon a time" is in-distribution at position 0. The model
usually emits id 0 when a story ends; `bos_token_id` and `eos_token_id` are both 0.

## Training

AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), {sched};
gradient clipping 1.0, float32, batch
{m['batch']} x {m['seq']} tokens, {m['steps']} steps, seed {m['seed']}, {m['threads']} CPU thread.
Measured training time: **{m['train_minutes']:.1f} minutes** of wall time on this
kit's build machine (2 shared cores; other jobs were compiling at the same
time, so an idle machine is faster). The time counts only training steps, not corpus
generation, evaluation or export.

| step | train loss | held-out loss (nats/token) | held-out bits/byte | minutes |
|---:|---:|---:|---:|---:|
{hist}

Final held-out result of the exported weights: **{m['heldout_loss_nats_per_token']:.4f} nats per token,
{m['heldout_bits_per_byte']:.4f} bits per byte** over {m['heldout_tokens']:,} predicted tokens
(bits per byte = total nats / total UTF-8 bytes of the predicted tokens / ln 2,
with `<|endoftext|>` counted as one byte). The number is low because the
grammar is very predictable; it says nothing about real English.

## Samples (PyTorch, float32, from the exported weights)

Generation stops at `<|endoftext|>` or after 80 tokens.

{samples}

## Golden outputs (`golden.json`)

| prompt | ids | greedy continuation (32 tokens, no stop at end-of-text) |
|---|---|---|
{gold}

## Retraining

From the repository root (see `tools/train/README.md` for the fast-BLAS note):

```sh
{cmd}
/usr/bin/python3 tools/train/check_export.py {folder}
```

`tools/train/run_all.sh` retrains both models (add `--threads N` to use more cores). Add `--resume` to continue
an interrupted run from its checkpoint in `tools/train/runs/{name}/`.
"""


if __name__ == "__main__":
    for folder in sys.argv[1:] or ["data/models/tiny", "data/models/tiny-draft"]:
        with open(os.path.join(folder, "README.md"), "w") as f:
            f.write(card(folder))
        print("wrote", os.path.join(folder, "README.md"))
