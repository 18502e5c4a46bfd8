#!/usr/bin/python3
"""POST /v1/chat/completions over real HTTP (issue 47).

    python3 tests/serve/test_chat.py --pdlab build/src/pdlab/pdlab

  no_template   the bundled tiny (no tokenizer_config.json) answers a chat request 400
                naming the missing chat_template, and keeps serving /v1/completions
  round_trip    tiny copied to a temp folder with a chat_template: greedy chat, whole and
                streamed, answers what /v1/completions answers for the rendered prompt
                (same prompt_tokens, same text); the stream starts with delta.role, ends
                with finish_reason, the usage chunk and [DONE]
  refusals      raise_exception in the template, and a template outside the kit's Jinja
                subset, are each a 400 saying so; the server goes on answering
  terminal      pdlab chat on the same folder, greedy, fed lines on stdin: each turn's
                prompt is what pdlab chat-prompt gives for the conversation so far (the
                earlier answers in it), the first answer is pdlab generate's on those ids,
                /reset starts over; tiny without a template exits 2 saying so
"""

import argparse
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
            "{{ raise_exception('system must come first') }}{% endif %}"
            "{{ '<|' + m['role'] + '|>' + m['content'] | trim + '\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Once upon a time "}]
RENDERED = "<|system|>Be brief.\n<|user|>Once upon a time\n<|assistant|>"


class Server:
    def __init__(self, pdlab, model):
        self.proc = subprocess.Popen([pdlab, "serve", "--model", str(model), "--port", "0", "--threads", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"pdlab serve did not start: {line!r} {self.proc.stderr.read()!r}")
        self.port = int(m.group(1))

    def post(self, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        return r.status, data

    def close(self):
        self.proc.kill()
        self.proc.wait(10)


def events(data):
    out = [line[len("data: "):] for line in data.split("\n") if line.startswith("data: ")]
    assert out and out[-1] == "[DONE]", f"the stream does not end with [DONE]: {data[-200:]!r}"
    return [json.loads(e) for e in out[:-1]]


def case_no_template(pdlab):
    s = Server(pdlab, "tiny")
    try:
        status, body = s.post("/v1/chat/completions", {"messages": MESSAGES})
        assert status == 400 and "chat_template" in json.loads(body)["error"]["message"], (status, body)
        status, body = s.post("/v1/completions", {"prompt": "Once", "max_tokens": 2})
        assert status == 200, (status, body)
    finally:
        s.close()


def with_template(folder, template):
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "chat_template": template}))


def case_round_trip(pdlab, folder):
    with_template(folder, TEMPLATE)
    s = Server(pdlab, folder)
    try:
        greedy = {"max_tokens": 8, "temperature": 0}
        status, body = s.post("/v1/completions", dict(greedy, prompt=RENDERED))
        assert status == 200, body
        want = json.loads(body)
        status, body = s.post("/v1/chat/completions", dict(greedy, messages=MESSAGES))
        assert status == 200, body
        got = json.loads(body)
        assert got["object"] == "chat.completion" and got["id"].startswith("chatcmpl-"), got
        choice = got["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": want["choices"][0]["text"]}, (choice, want)
        assert choice["finish_reason"] == want["choices"][0]["finish_reason"], choice
        assert got["usage"] == want["usage"], (got["usage"], want["usage"])

        status, body = s.post("/v1/chat/completions", dict(greedy, messages=MESSAGES, stream=True,
                                                           stream_options={"include_usage": True}))
        assert status == 200, body
        chunks = events(body)
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, chunks[0]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks), chunks
        deltas = [c["choices"][0] for c in chunks[1:-1]]
        assert "".join(d["delta"].get("content", "") for d in deltas) == choice["message"]["content"], deltas
        assert [d["finish_reason"] for d in deltas][-1] == choice["finish_reason"], deltas
        assert all(d["finish_reason"] is None for d in deltas[:-1]), deltas
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == got["usage"], chunks[-1]
    finally:
        s.close()


def case_refusals(pdlab, folder):
    with_template(folder, TEMPLATE)
    s = Server(pdlab, folder)
    try:
        status, body = s.post("/v1/chat/completions", {"messages": MESSAGES[::-1]})
        assert status == 400 and "system must come first" in body, (status, body)
        status, body = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x", "tool_calls": []}]})
        assert status == 400 and "tool_calls" in body, (status, body)
        status, _ = s.post("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 1})
        assert status == 200
    finally:
        s.close()
    with_template(folder, "{% macro m() %}{% endmacro %}")
    s = Server(pdlab, folder)
    try:
        status, body = s.post("/v1/chat/completions", {"messages": MESSAGES})
        assert status == 400 and "{% macro %}" in body, (status, body)
        assert s.post("/v1/completions", {"prompt": "Once", "max_tokens": 1})[0] == 200
    finally:
        s.close()


def run(args, stdin=""):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=120)


def case_terminal(pdlab, folder):
    with_template(folder, TEMPLATE)
    system, user, again = MESSAGES[0]["content"], MESSAGES[1]["content"], "And then?"
    chat = run([pdlab, "chat", "-m", str(folder), "--system", system, "--greedy", "-n", "8", "--threads", "1"],
               f"{user}\n{again}\n/reset\n{user}\n/quit\nnever read\n")
    assert chat.returncode == 0, chat.stderr
    prompts = [int(n) for n in re.findall(r"\[prompt (\d+) tokens", chat.stderr)]
    assert len(prompts) == 3, chat.stderr

    def prompt_ids(messages):
        path = folder / "messages.json"
        path.write_text(json.dumps(messages))
        r = run([pdlab, "chat-prompt", "-m", str(folder), "--messages", str(path), "--ids"])
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    # The first answer is generate's on the first prompt; the output begins with
    # it and ends with it again (the turn after /reset), each ending in a newline.
    first = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    ids1 = prompt_ids(first)
    gen = run([pdlab, "generate", "-m", str(folder), "--prompt-ids", ids1, "-n", "8", "--greedy", "--threads", "1"])
    assert gen.returncode == 0, gen.stderr
    answer1 = gen.stdout[:-1]
    out = chat.stdout
    assert out.startswith(answer1 + "\n") and out.endswith(answer1 + "\n"), (out, answer1)
    second = first + [{"role": "assistant", "content": answer1}, {"role": "user", "content": again}]
    ids2 = prompt_ids(second)
    assert prompts == [len(ids1.split(",")), len(ids2.split(",")), len(ids1.split(","))], (prompts, ids1, ids2)
    assert prompts[1] > prompts[0], prompts  # the first answer is in the second prompt
    none = run([pdlab, "chat", "-m", "tiny"], "hi\n")
    assert none.returncode == 2 and "no chat template" in none.stderr, (none.returncode, none.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    a = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny-chat"
        shutil.copytree(ROOT / "data" / "models" / "tiny", folder)
        for name, run in [("no_template", lambda: case_no_template(a.pdlab)),
                          ("round_trip", lambda: case_round_trip(a.pdlab, folder)),
                          ("refusals", lambda: case_refusals(a.pdlab, folder)),
                          ("terminal", lambda: case_terminal(a.pdlab, folder))]:
            try:
                run()
                print(f"ok    serve.chat.{name}")
            except AssertionError as e:
                failed += 1
                print(f"FAIL  serve.chat.{name}: {e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
