#!/usr/bin/python3
"""pdlab serve over real HTTP on 127.0.0.1 (issue 14).

    python3 tests/serve/test_server.py --pdlab build/src/pdlab/pdlab [--case NAME]

One server on an ephemeral port (--port 0, --batching continuous: the default)
serves every case, in this order; each case is bounded in time and stops by itself:

  stream_well_formed  every SSE event is `data: <chunk JSON>`, one chunk per token, one
                      finish_reason on the last, the usage chunk, then `data: [DONE]`
  non_stream_usage    the whole JSON answer counts prompt and completion tokens right
  stop_string         a stop string cut from a greedy answer ends the stream just before it
                      ("stop"), and the request's KV blocks are free once it has ended
  bad_requests        each bad body gets 400 with OpenAI's error JSON naming the field,
                      and the server goes on answering
  body_too_large      a 10 MiB body gets 413 with error JSON, before the body is read
  slow_loris          a client stuck mid-headers is dropped after --read-timeout, and
                      does not hold up anyone else meanwhile
  concurrent          CONCURRENT greedy streams at once: each well formed with its own id,
                      several running together (/metrics), and every text identical to
                      what a second server with --batching serial answers one at a time
  disconnects         100 clients hang up mid-stream: all 100 cancelled, no request left
                      running or waiting, every KV block back on the free list (/metrics)
  churn               10,000 short requests from 16 clients, 1 in 4 hung up after its first
                      token: all answered, every KV block back, and resident memory after
                      them within CHURN_RSS_GROWTH_KB of what it was after 1,000 to warm up
  load                64 concurrent streaming clients for LOAD_SECONDS (10; the issue's
                      60 with PDLAB_SERVE_LOAD_SECONDS=60): every stream well formed, no
                      request lost or duplicated, resident memory after warm-up grows by
                      less than RSS_GROWTH_KB; --soak makes it the 10-minute soak (not in CI)
  loadgen             `pdlab loadgen` against this server: 8 requests, all completed, its
                      JSON (vLLM's keys) counts exactly the tokens asked for; a bad --url
                      or --goodput exits 2 with a message
  port_in_use         a second server on the same port exits 2 naming --port
  sigterm             SIGTERM mid-stream: the stream still ends with [DONE], new
                      connections are refused, the server exits 0

Only the standard library: http.client, socket, threads.
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

READ_TIMEOUT_S = 2          # the server's --read-timeout
LOAD_CLIENTS = 64
LOAD_SECONDS = int(os.environ.get("PDLAB_SERVE_LOAD_SECONDS", "10"))  # CI's budget; the issue asks 60
WARMUP_SECONDS = min(5, LOAD_SECONDS // 3)
SOAK_SECONDS = 600          # --soak: ten minutes of the load case
RSS_GROWTH_KB = 16 * 1024   # steady state: no per-request leak, so far below this
DISCONNECTS = 100
CHURN_REQUESTS = 10_000     # churn: short requests, some cancelled; RSS must stay flat
CHURN_WARMUP = 1_000        # requests before the first RSS reading (arenas, caches, the pool's first use)
CHURN_CANCEL_EVERY = 4
CHURN_CLIENTS = 16
CHURN_SECONDS = 240
CHURN_RSS_GROWTH_KB = 8 * 1024  # seen: +0.9 to +3.2 MB; a leak of 1 kB a request would be 10 MB
CONCURRENT = 32


class Server:
    """pdlab serve on an ephemeral port, killed at exit whatever happens."""

    def __init__(self, pdlab, extra=()):
        self.proc = subprocess.Popen(
            [pdlab, "serve", "--model", "tiny", "--port", "0", "--threads", "1",
             "--read-timeout", str(READ_TIMEOUT_S), "--shutdown-grace", "10", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"pdlab serve did not say where it listens; it printed {line!r} "
                     f"and on stderr {self.proc.stderr.read()!r}")
        self.port = int(m.group(1))

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def post(server, body, timeout=30):
    """(status, parsed JSON) of POST /v1/completions with `body` (a dict or raw bytes)."""
    c = server.conn(timeout)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    c.request("POST", "/v1/completions", body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.status, json.loads(r.read())
    c.close()
    return out


def metrics(server):
    c = server.conn()
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def read_stream(resp):
    """The chunks of an SSE response, checked: (chunks, usage, id). Raises AssertionError on any fault."""
    assert resp.status == 200, f"a stream must answer 200, got {resp.status}: {resp.read()[:300]!r}"
    assert resp.getheader("Content-Type", "").startswith("text/event-stream"), resp.getheader("Content-Type")
    events = resp.read().decode().split("\n\n")
    assert events[-1] == "", "an SSE stream ends with a blank line after its last event"
    assert events[-2] == "data: [DONE]", f"the last event must be 'data: [DONE]', got {events[-2]!r}"
    chunks, usage, ids = [], None, set()
    for e in events[:-2]:
        assert e.startswith("data: "), f"every event is one 'data: ' line, got {e[:80]!r}"
        j = json.loads(e[6:])
        assert j["object"] == "text_completion" and j["id"].startswith("cmpl-"), j
        ids.add(j["id"])
        if j["choices"]:
            chunks.append(j["choices"][0])
        else:
            usage = j["usage"]
    finishes = [c["finish_reason"] for c in chunks]
    assert finishes and finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1]), \
        f"only the last chunk carries a finish_reason (stop or length), got {finishes}"
    assert len(ids) == 1, f"every chunk of one stream carries its request's id, got {sorted(ids)}"
    return chunks, usage, ids.pop()


def stream(server, body, timeout=60):
    c = server.conn(timeout)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)).encode())
    out = read_stream(c.getresponse())
    c.close()
    return out


def case_stream_well_formed(server):
    chunks, usage, _ = stream(server, {"prompt": "Once upon a time", "max_tokens": 12, "seed": 1,
                                    "stream_options": {"include_usage": True}})
    assert usage is not None, "stream_options.include_usage asks for a usage chunk before [DONE]"
    assert len(chunks) == usage["completion_tokens"], \
        f"one chunk per generated token: {len(chunks)} chunks for {usage['completion_tokens']} tokens"
    assert usage["prompt_tokens"] > 0 and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    whole_status, whole = post(server, {"prompt": "Once upon a time", "max_tokens": 12, "seed": 1})
    assert "".join(c["text"] for c in chunks) == whole["choices"][0]["text"], \
        "the streamed pieces must join to the text the same request gets without streaming"


def case_non_stream_usage(server):
    status, j = post(server, {"prompt": [1, 2, 3, 4, 5], "max_tokens": 7, "ignore_eos": True, "temperature": 0})
    assert status == 200, j
    assert j["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}, \
        f"5 prompt ids and 7 tokens with ignore_eos must count as 5 + 7, got {j['usage']}"
    assert j["choices"][0]["finish_reason"] == "length", j


def case_stop_string(server):
    body = {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    _, free = post(server, body)
    text = free["choices"][0]["text"]
    stop = text[len(text) // 2:len(text) // 2 + 3]
    assert len(stop) == 3 and stop.strip(), f"the greedy text {text!r} is too short to cut a stop string from"
    chunks, usage, _ = stream(server, dict(body, stop=[stop], stream_options={"include_usage": True}))
    got = "".join(c["text"] for c in chunks)
    assert got == text[:text.index(stop)] and chunks[-1]["finish_reason"] == "stop", \
        f"stop {stop!r}: the client gets the text before it ({text[:text.index(stop)]!r}), got {got!r}"
    assert usage["completion_tokens"] < 24, usage
    m = wait_idle(server, 30)
    assert m["pdlab_kv_blocks_used"] == 0, \
        f"a request ended by a stop string must give its blocks back: {m['pdlab_kv_blocks_used']:.0f} held after 30 s"


BAD_REQUESTS = [  # (body, the field the error must name or None)
    (b'{"prompt": "hi", ', None),                                   # invalid JSON
    (b'[1, 2]', None),                                              # not an object
    ({"max_tokens": 4}, "prompt"),                                  # no prompt
    ({"prompt": 42}, "prompt"),                                     # wrong type
    ({"prompt": "hi", "max_tokens": "ten"}, "max_tokens"),          # wrong type
    ({"prompt": "hi", "max_tokens": -1}, "max_tokens"),             # negative
    ({"prompt": "hi", "max_tokens": 10 ** 12}, "max_tokens"),       # huge
    ({"prompt": "hi", "temperature": "hot"}, "temperature"),
    ({"prompt": "hi", "stream": "yes"}, "stream"),
    ({"prompt": [1, 2, 100000]}, "prompt"),                         # id out of range
    ({"prompt": [1, -2]}, "prompt"),
    ({"prompt": [1] * 600}, "prompt"),                              # longer than tiny's context (512)
    ({"prompt": [1] * 300, "max_tokens": 300}, "max_tokens"),       # fits alone, not with its output
    ({"prompt": ""}, "prompt"),                                     # empty
    ({"prompt": "hi", "stop": "x" * 4096}, "stop"),                 # a 4 KiB stop string (bound: 256 bytes)
    ({"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}, "stop"),  # more than OpenAI's 4
    ({"prompt": "hi", "n": 2}, "n"),                                # a field this server does only as 1
    ({"prompt": "hi", "frequency_penalty": 0.5}, "frequency_penalty"),  # an unknown field
]


def case_bad_requests(server):
    for body, param in BAD_REQUESTS:
        status, j = post(server, body)
        assert status == 400, f"{body!r:.80} must get 400, got {status}: {j}"
        err = j.get("error", {})
        assert err.get("type") == "invalid_request_error" and err.get("message"), \
            f"OpenAI's error JSON has error.type and error.message, got {j}"
        assert err.get("param") == param, f"{body!r:.80}: error.param should be {param!r}, got {err.get('param')!r}"
        ok, good = post(server, {"prompt": "Hi", "max_tokens": 2})
        assert ok == 200, f"after {body!r:.60} the server must keep serving, got {ok}: {good}"


def case_body_too_large(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    size = 10 * 1024 * 1024
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {size}\r\n\r\n".encode() + b'{"prompt": "' + b"a" * 4096)
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        part = s.recv(65536)
        if not part:
            break
        answer += part
    s.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), f"a 10 MiB body must get 413 at once, got {head[:80]!r}"
    assert json.loads(body)["error"]["message"], body


def case_slow_loris(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT_S + 10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")  # ... and nothing more
    t0 = time.monotonic()
    status, j = post(server, {"prompt": "Hi", "max_tokens": 4}, timeout=10)
    assert status == 200, f"a stalled client must not block others, got {status}: {j}"
    assert time.monotonic() - t0 < READ_TIMEOUT_S, "another client waited for the stalled one"
    dropped = False
    try:  # the server answers 400 (the request never came whole) and closes, or just closes
        while s.recv(1024):
            pass
        dropped = True
    except ConnectionResetError:
        dropped = True
    waited = time.monotonic() - t0
    s.close()
    assert dropped and waited < READ_TIMEOUT_S + 5, \
        f"the stalled client must be dropped after --read-timeout {READ_TIMEOUT_S} s (waited {waited:.1f} s)"


CONCURRENT_PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a boy named Tom",
                      "The sun was", "Tim and Sue", "There was a big", "Mom said"]


def concurrent_requests():
    """CONCURRENT greedy requests, different prompts and lengths, the same on every run."""
    return [{"prompt": f"{CONCURRENT_PROMPTS[i % len(CONCURRENT_PROMPTS)]} {i}", "max_tokens": 8 + (5 * i) % 17,
             "temperature": 0, "ignore_eos": True} for i in range(CONCURRENT)]


def stream_into(server, body, i, start, texts, errors):
    try:
        start.wait(30)
        chunks, _, cmpl_id = stream(server, body, timeout=120)
        assert len(chunks) == body["max_tokens"], f"{len(chunks)} chunks for max_tokens {body['max_tokens']}"
        texts[i] = (cmpl_id, "".join(c["text"] for c in chunks))
    except Exception as e:  # noqa: BLE001 - reported by the case
        errors.append(f"request {i}: {e!r}")


def most_running(server, until):
    """The largest pdlab_num_requests_running seen until `until` is set."""
    most = 0
    while not until.is_set():
        most = max(most, metrics(server)["pdlab_num_requests_running"])
        time.sleep(0.02)
    return most


def case_concurrent(server, pdlab):
    bodies, texts, errors = concurrent_requests(), [None] * CONCURRENT, []
    start, finished = threading.Barrier(CONCURRENT), threading.Event()
    clients = [threading.Thread(target=stream_into, args=(server, b, i, start, texts, errors))
               for i, b in enumerate(bodies)]
    peak = []
    watcher = threading.Thread(target=lambda: peak.append(most_running(server, finished)))
    watcher.start()
    for t in clients:
        t.start()
    for t in clients:
        t.join(180)
    finished.set()
    watcher.join(30)
    assert not errors, f"{len(errors)} of {CONCURRENT} streams failed, e.g. {errors[:3]}"
    ids = [t[0] for t in texts]
    assert len(set(ids)) == CONCURRENT, f"{CONCURRENT} requests must get {CONCURRENT} different ids, got {len(set(ids))}"
    assert peak and peak[0] >= 2, \
        f"{CONCURRENT} clients at once, yet /metrics never showed two requests running together ({peak})"
    serial = Server(pdlab, ["--batching", "serial"])
    try:
        for i, body in enumerate(bodies):
            status, j = post(serial, body, timeout=60)
            assert status == 200, j
            assert texts[i][1] == j["choices"][0]["text"], \
                (f"request {i} ({body}): greedy text batched {texts[i][1]!r} but served alone {j['choices'][0]['text']!r}; "
                 f"batching must not change what a request computes")
    finally:
        serial.close()
    print(f"  concurrent: {CONCURRENT} streams, up to {peak[0]:.0f} running together, texts equal to serial serving")


def hang_up_after_first_token(server, errors):
    try:
        c = server.conn(60)
        body = {"prompt": [1], "max_tokens": 400, "ignore_eos": True, "stream": True}
        c.request("POST", "/v1/completions", body=json.dumps(body).encode())
        r = c.getresponse()
        line = r.readline()
        assert line.startswith(b"data: "), f"expected a first chunk, got {line[:80]!r}"
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    except Exception as e:  # noqa: BLE001 - reported by the case
        errors.append(repr(e))


def wait_idle(server, seconds):
    """/metrics once nothing is running or waiting and no KV block is held (or after `seconds`).
    A request's end reaches the client a step before its blocks are freed: poll, do not read once."""
    deadline = time.monotonic() + seconds
    while True:
        m = metrics(server)
        idle = m["pdlab_num_requests_running"] == 0 and m["pdlab_num_requests_waiting"] == 0
        if (idle and m["pdlab_kv_blocks_used"] == 0) or time.monotonic() > deadline:
            return m
        time.sleep(0.2)


def case_disconnects(server):
    before = metrics(server).get('pdlab_request_success_total{finished_reason="cancelled"}', 0)
    errors = []
    clients = [threading.Thread(target=hang_up_after_first_token, args=(server, errors)) for _ in range(DISCONNECTS)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(120)
    assert not errors, f"clients failed before hanging up: {errors[:3]}"
    m = wait_idle(server, 60)
    cancelled = m.get('pdlab_request_success_total{finished_reason="cancelled"}', 0) - before
    assert cancelled == DISCONNECTS, f"{DISCONNECTS} clients hung up mid-stream, {cancelled:.0f} requests cancelled"
    assert m["pdlab_num_requests_running"] == 0 and m["pdlab_num_requests_waiting"] == 0, m
    assert m["pdlab_kv_blocks_used"] == 0, f"cancelled requests must free their KV blocks: {m['pdlab_kv_blocks_used']} held"
    assert m["pdlab_kv_blocks_free"] == m["pdlab_kv_blocks_total"], \
        f"every block back on the free list: {m['pdlab_kv_blocks_free']:.0f} of {m['pdlab_kv_blocks_total']:.0f} free"


def churn_client(server, work, faults, lock):
    """Takes request numbers from `work` until it is empty: every CHURN_CANCEL_EVERY-th streams and
    hangs up after its first token (a cancellation), the rest ask for one token and read the answer."""
    while True:
        with lock:
            if not work:
                return
            i = work.pop()
        try:
            if i % CHURN_CANCEL_EVERY == 0:
                hang_up_after_first_token(server, faults)
                continue
            status, j = post(server, {"prompt": [1, 2, 3], "max_tokens": 1, "seed": i})
            assert status == 200 and j["usage"]["completion_tokens"] == 1, (status, j)
        except Exception as e:  # noqa: BLE001 - reported by the case
            with lock:
                faults.append(repr(e))


def churn(server, requests):
    faults, lock = [], threading.Lock()
    work = list(range(requests))
    clients = [threading.Thread(target=churn_client, args=(server, work, faults, lock)) for _ in range(CHURN_CLIENTS)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(CHURN_SECONDS)
    assert not any(t.is_alive() for t in clients), f"{requests} short requests did not finish in {CHURN_SECONDS} s"
    assert not faults, f"{len(faults)} of {requests} requests failed, e.g. {faults[:3]}"


def case_churn(server):
    t0 = time.monotonic()
    churn(server, CHURN_WARMUP)
    rss_warm = wait_idle_rss(server)
    cancelled_key = 'pdlab_request_success_total{finished_reason="cancelled"}'
    before = metrics(server).get(cancelled_key, 0)
    churn(server, CHURN_REQUESTS)
    rss_end = wait_idle_rss(server)
    m = wait_idle(server, 30)
    cancelled = m.get(cancelled_key, 0) - before
    assert cancelled == CHURN_REQUESTS // CHURN_CANCEL_EVERY, \
        f"{CHURN_REQUESTS // CHURN_CANCEL_EVERY} clients hung up mid-stream, {cancelled:.0f} requests cancelled"
    assert m["pdlab_kv_blocks_used"] == 0, f"every KV block back after the churn: {m['pdlab_kv_blocks_used']:.0f} held"
    print(f"  churn: {CHURN_REQUESTS} requests (1 in {CHURN_CANCEL_EVERY} cancelled mid-stream) in "
          f"{time.monotonic() - t0:.0f} s; RSS {rss_warm} kB after {CHURN_WARMUP} to warm up, {rss_end} kB after")
    assert rss_end - rss_warm < CHURN_RSS_GROWTH_KB, \
        f"resident memory grew {rss_end - rss_warm} kB over {CHURN_REQUESTS} requests (bound {CHURN_RSS_GROWTH_KB})"


def wait_idle_rss(server):
    wait_idle(server, 30)
    return server.rss_kb()


def percentile(values, p):
    """The p-th percentile by the nearest rank (0 for none)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))] if s else 0.0


def load_client(server, stop_at, seeds, faults, lock, seconds):
    rng = random.Random()
    while time.monotonic() < stop_at:
        seed = rng.randrange(1 << 40)
        want = rng.randint(4, 16)
        try:
            t0 = time.monotonic()
            chunks, usage, _ = stream(server, {"prompt": "Once upon a time", "max_tokens": want, "seed": seed,
                                            "ignore_eos": True, "stream_options": {"include_usage": True}})
            assert len(chunks) == want == usage["completion_tokens"], (len(chunks), want, usage)
            with lock:
                seeds.append(seed)
                seconds.append(time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - reported by the case
            with lock:
                faults.append(repr(e))


def case_load(server):
    done_before = sum(v for k, v in metrics(server).items() if k.startswith("pdlab_request_success_total"))
    seeds, faults, lock, seconds = [], [], threading.Lock(), []
    stop_at = time.monotonic() + LOAD_SECONDS
    clients = [threading.Thread(target=load_client, args=(server, stop_at, seeds, faults, lock, seconds))
               for _ in range(LOAD_CLIENTS)]
    for t in clients:
        t.start()
    time.sleep(WARMUP_SECONDS)
    rss_warm = server.rss_kb()
    for t in clients:
        t.join(LOAD_SECONDS + 120)
    rss_end = server.rss_kb()
    assert not faults, f"{len(faults)} streams failed or were malformed, e.g. {faults[:3]}"
    assert seeds and len(set(seeds)) == len(seeds), "each request answered exactly once"
    done = sum(v for k, v in wait_idle(server, 30).items() if k.startswith("pdlab_request_success_total"))
    assert done - done_before == len(seeds), \
        f"the server finished {done - done_before:.0f} requests, the clients got {len(seeds)}: lost or extra"
    growth = rss_end - rss_warm
    print(f"  load: {len(seeds)} streams by {LOAD_CLIENTS} clients in {LOAD_SECONDS} s "
          f"({len(seeds) / LOAD_SECONDS:.1f} requests/s); "
          f"RSS {rss_warm} kB after warm-up, {rss_end} kB at the end; "
          f"stream seconds p50 {percentile(seconds, 50):.2f}, p99 {percentile(seconds, 99):.2f}, "
          f"max {max(seconds, default=0):.2f}")
    assert growth < RSS_GROWTH_KB, f"resident memory grew {growth} kB under steady load (bound {RSS_GROWTH_KB})"


def case_loadgen(server, pdlab):
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"loadgen-{os.getpid()}.json")
    run = subprocess.run([pdlab, "loadgen", "--url", f"http://127.0.0.1:{server.port}", "--rate", "inf",
                          "--num-requests", "8", "--prompt-len", "fixed:8", "--output-len", "fixed:6",
                          "--ignore-eos", "--goodput", "60000,60000", "--json", out],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"loadgen failed: {run.stderr[-400:]}"
    assert "Time to First Token" in run.stdout, run.stdout
    with open(out) as f:
        j = json.load(f)
    os.unlink(out)
    assert j["completed"] == 8 and j["total_input_tokens"] == 64 and j["total_output_tokens"] == 48, \
        f"8 requests of 8 prompt and 6 output tokens: {j}"
    assert j["request_goodput"] == j["request_throughput"], "every request meets a 60 s limit"
    for flags in (["--url", "ftp://x"], ["--goodput", "fast"]):
        bad = subprocess.run([pdlab, "loadgen", *flags], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "error" in bad.stderr, f"{flags}: exit {bad.returncode}, {bad.stderr!r}"


def case_port_in_use(server, pdlab):
    run = subprocess.run([pdlab, "serve", "--port", str(server.port), "--threads", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--port" in run.stderr, \
        f"a taken port must exit 2 with a message naming --port: exit {run.returncode}, {run.stderr[-300:]!r}"


def case_sigterm(server):
    c = server.conn(60)
    c.request("POST", "/v1/completions",
              body=json.dumps({"prompt": [1], "max_tokens": 30, "ignore_eos": True, "stream": True}).encode())
    r = c.getresponse()
    first = r.readline()
    assert first.startswith(b"data: "), first
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    refused = False
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    except ConnectionRefusedError:
        refused = True
    rest = first + r.read()
    c.close()
    assert rest.rstrip().endswith(b"data: [DONE]"), f"the stream in flight must finish: ...{rest[-120:]!r}"
    assert refused, "after SIGTERM new connections must be refused"
    code = server.proc.wait(30)
    assert code == 0, f"SIGTERM must end the server with exit 0, got {code}"


CASES = [case_stream_well_formed, case_non_stream_usage, case_stop_string, case_bad_requests, case_body_too_large,
         case_slow_loris, case_concurrent, case_disconnects, case_churn, case_load, case_loadgen, case_port_in_use,
         case_sigterm]


def main():
    global LOAD_SECONDS, WARMUP_SECONDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    ap.add_argument("--case", help="run only this case (and sigterm still ends the server)")
    ap.add_argument("--soak", action="store_true",
                    help=f"the full (non-CI) run: case load at saturation for {SOAK_SECONDS} s instead of {LOAD_SECONDS}")
    a = ap.parse_args()
    if a.soak:
        LOAD_SECONDS, WARMUP_SECONDS = SOAK_SECONDS, 30
    server = Server(a.pdlab)
    failed = []
    try:
        for case in CASES:
            name = case.__name__[5:]
            if a.case and name != a.case:
                continue
            t0 = time.monotonic()
            try:
                case(server, a.pdlab) if case in (case_concurrent, case_loadgen, case_port_in_use) else case(server)
                print(f"ok    serve.{name} ({time.monotonic() - t0:.1f} s)")
            except AssertionError as e:
                failed.append(name)
                print(f"FAIL  serve.{name}: {e}")
    finally:
        server.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
