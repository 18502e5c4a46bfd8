#!/usr/bin/python3
"""--timeline FILE: the Chrome trace pdlab and the lab programs write (issue 35).

    /usr/bin/python3 tests/python/test_timeline.py --pdlab build/src/pdlab/pdlab \
        [--lab02 PROGRAM --lab06 PROGRAM --lab08 PROGRAM --lab09 PROGRAM --lab16 PROGRAM]

On the bundled tiny model, a few passes each (about 5 s in all):

  generate    the file is JSON with traceEvents; every layer part (product,
              attention, other) lies inside a layer (the embedding and the
              output head inside the pass), every layer inside a prefill or
              decode pass; one prefill and n-1 decode spans, whose
              durations add up to the reported decode time within 5%
  bench       each pass inside a warm-up or measured run; the decode spans of
              the measured runs add up to bench's decode_step_ms within 5%;
              --timeline-detail phases records no layers
  serve_sim   each request's track against --json's per_request: output
              tokens, finish reason, TTFT and end-to-end latency (1 ms), one
              "first token", its decode spans; one step span per step
  speculative --speculative-k: decode spans give accepted + 1 tokens each, and
              account for every output token; speculative rows and accepted
              tokens add up to serve-sim's speculation counts
  preempted   a KV pool too small for the batch: the "preempted" spans number
              the preemptions serve-sim reports, counters stay within the pool
  serve       pdlab serve (continuous batching), 3 concurrent requests, then
              SIGTERM: the file is written at the stop; each request's track
              against the response's usage (output tokens, finish reason), one
              "first token", n-1 decode spans; every engine pass inside a step
  serve_serial  --batching serial: one prefill and n-1 decodes per request
              on the engine's track
  bad_input   exit 2 and one message for a folder that does not exist, a
              folder as the file, --device cuda, bench's precision list,
              --draft; nothing is written for a refused option, and a run
              that fails after opening the file removes it
  lab02       (with --lab02) prefill and decode spans of every section
  lab06       (with --lab06) one process per replay, each with its requests
  lab09       (with --lab09, where mpirun is installed) the colocated replay
              and the disaggregated run as two processes; every request of the
              latter queued, prefilled, waiting for its KV, then decoding, one
              token instant per output token; the prefill rank's track holds
              one span per request, never two at once; the decode rank's
              counter never below 0 and back to 0 at the end
  lab16       (with --lab16, where mpirun is installed) 2 ranks: a track per
              rank, a prefill and 7 decode spans each, every all-reduce (2 a
              layer a pass) inside a pass, whose "all-reduce ms" is their sum
  lab08       (with --lab08) one process per run (each budget, the
              controller), each with its requests; no step of a fixed budget
              runs more tokens than the budget, and the long prompt's chunks
              add up to its length

No torch needed. Ends with "N passed, M failed".
"""

import argparse
import fnmatch
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request

PARTS = {"product", "attention", "other"}


def run(cmd, expect=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != expect:
        raise AssertionError("%s\nexit %d (expected %d): %s" % (" ".join(cmd), p.returncode, expect,
                                                                 p.stderr.decode(errors="replace")[-2000:]))
    return p.stderr.decode(errors="replace")


def load(path):
    with open(path) as f:
        j = json.load(f)
    assert isinstance(j.get("traceEvents"), list) and j["traceEvents"], "%s: no traceEvents list" % path
    return j["traceEvents"]


def spans(events, **match):
    """The complete events ("X") whose fields equal `match`, as (start_ns, end_ns, event)."""
    out = []
    for e in events:
        if e["ph"] == "X" and all(e.get(k) == v for k, v in match.items()):
            start = round(e["ts"] * 1000)
            out.append((start, start + round(e["dur"] * 1000), e))
    return sorted(out, key=lambda s: s[0])


def inside(child, parents):
    """The parent span (same process and track) that holds `child`, or None."""
    c0, c1, ce = child
    for p0, p1, pe in parents:
        if p0 <= c0 and c1 <= p1 and pe["pid"] == ce["pid"] and pe["tid"] == ce["tid"]:
            return pe
    return None


def check_nesting(events, outer_cats):
    """Parts inside layers, layers inside a pass, passes inside `outer_cats` (when given)."""
    layers = spans(events, cat="layer")
    passes = spans(events, cat="phase")
    assert layers, "no layer spans"
    for s in spans(events):
        if s[2]["cat"] in PARTS:
            # The embedding and the output head belong to the pass, not to a layer.
            holders = passes if s[2]["name"] in ("embed", "logits") else layers
            assert inside(s, holders), "part %s at %.3f us is in no %s" % (
                s[2]["name"], s[2]["ts"], "pass" if holders is passes else "layer")
    for s in layers:
        assert inside(s, passes), "%s at %.3f us is in no prefill/decode span" % (s[2]["name"], s[2]["ts"])
    for cat in outer_cats:
        outers = spans(events, cat=cat)
        for s in passes:
            assert inside(s, outers), "%s at %.3f us is in no %s span" % (s[2]["name"], s[2]["ts"], cat)


def within(a, b, rel, what):
    assert abs(a - b) <= rel * max(abs(a), abs(b)), "%s: %.4f against %.4f (more than %g%% apart)" % (
        what, a, b, rel * 100)


def case_generate(a, work):
    tl, js = os.path.join(work, "g.json"), os.path.join(work, "g-result.json")
    n = 16
    run([a.pdlab, "generate", "-m", "tiny", "--prompt-ids", "5,6,7,8,9,10", "-n", str(n), "--greedy",
         "--ignore-eos", "--threads", "1", "--json", js, "--timeline", tl])
    events = load(tl)
    with open(js) as f:
        result = json.load(f)
    check_nesting(events, [])
    prefill, decode = spans(events, name="prefill"), spans(events, name="decode")
    assert len(prefill) == 1 and len(decode) == n - 1, "%d prefill and %d decode spans, expected 1 and %d" % (
        len(prefill), len(decode), n - 1)
    decode_ms = sum(e["dur"] for _, _, e in decode) / 1000
    within(decode_ms, sum(result["timings"]["decode_ms"]), 0.05, "decode spans against timings.decode_ms (ms)")
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "engine" in names, "no track named engine: %s" % names


def bench_args(a, tl, js, *extra):
    return [a.pdlab, "bench", "-m", "tiny", "-P", "16", "-n", "6", "--warmup", "1", "-r", "2", "--threads", "1",
            "--probe-seconds", "0", "--peak-gflops", "50", "--json", js, "--timeline", tl] + list(extra)


def case_bench(a, work):
    tl, js = os.path.join(work, "b.json"), os.path.join(work, "b-result.json")
    run(bench_args(a, tl, js))
    events = load(tl)
    with open(js) as f:
        result = json.load(f)
    check_nesting(events, ["run"])
    runs = spans(events, cat="run")
    assert [e["name"] for _, _, e in runs] == ["warm-up run", "measured run", "measured run"], \
        "runs %s" % [e["name"] for _, _, e in runs]
    measured = [s for s in runs if s[2]["name"] == "measured run"]
    decode = [s for s in spans(events, name="decode") if inside(s, measured)]
    assert len(decode) == len(result["decode_step_ms"]), "%d decode spans in measured runs, bench timed %d" % (
        len(decode), len(result["decode_step_ms"]))
    within(sum(e["dur"] for _, _, e in decode) / 1000, sum(result["decode_step_ms"]), 0.05,
           "decode spans against decode_step_ms (ms)")
    run(bench_args(a, tl, js, "--timeline-detail", "phases"))
    events = load(tl)
    assert not spans(events, cat="layer"), "--timeline-detail phases recorded layers"
    assert len(spans(events, cat="phase")) == 3 * 7, "phases: %d pass spans, expected 3 runs x 7" % len(
        spans(events, cat="phase"))


def serve_sim(a, work, name, *extra, output_len="fixed:12"):
    tl, js = os.path.join(work, name + ".json"), os.path.join(work, name + "-result.json")
    run([a.pdlab, "serve-sim", "-m", "tiny", "--rate", "inf", "--num-requests", "5", "--prompt-len",
         "uniform:8:40", "--output-len", output_len, "--max-seqs", "3", "--threads", "1", "--quiet",
         "--timeline-detail", "phases", "--json", js, "--timeline", tl] + list(extra))
    with open(js) as f:
        return load(tl), json.load(f)


def case_serve_sim(a, work):
    events, result = serve_sim(a, work, "s")
    assert result["preemptions"] == 0, "this case wants no preemption"
    assert len(spans(events, name="step", tid=1)) == result["steps"], "step spans against steps"
    for i, r in enumerate(result["per_request"]):
        tid = 10 + i
        track = spans(events, name="request %d" % i, tid=tid)
        assert len(track) == 1, "request %d: %d request spans" % (i, len(track))
        start, end, e = track[0]
        args, tokens = e["args"], r["token_s"]
        assert args["output tokens"] == len(r["output_ids"]) == len(tokens), "request %d: output tokens" % i
        assert args["finish reason"] == r["finish_reason"], "request %d: finish reason %s against %s" % (
            i, args["finish reason"], r["finish_reason"])
        ttft = (tokens[0] - r["arrival_s"]) * 1000
        e2el = (tokens[-1] - r["arrival_s"]) * 1000
        assert abs(args["ttft ms"] - ttft) < 1.0, "request %d: TTFT %.3f ms against %.3f" % (i, args["ttft ms"], ttft)
        assert abs((end - start) / 1e6 - e2el) < 1.0, "request %d: span of %.3f ms against E2EL %.3f" % (
            i, (end - start) / 1e6, e2el)
        firsts = [x for x in events if x["ph"] == "i" and x["tid"] == tid and x["name"] == "first token"]
        assert len(firsts) == 1, "request %d: %d first-token instants" % (i, len(firsts))
        decode = spans(events, name="decode", tid=tid)
        assert len(decode) == len(tokens) - 1, "request %d: %d decode spans for %d tokens" % (
            i, len(decode), len(tokens))
        for s in spans(events, tid=tid):
            assert s[2] is e or inside(s, track), "request %d: %s outside its request span" % (i, s[2]["name"])


def case_speculative(a, work):
    """With --speculative-k a decode span that checked proposed tokens gave
    accepted + 1 of them: the spans still account for every output token, and
    the steps' rows for every row the batch ran."""
    # 60 tokens: the outputs start to repeat, and some proposals are kept.
    events, result = serve_sim(a, work, "k", "--speculative-k", "4", "--ngram-min", "1", "--ignore-eos",
                               output_len="fixed:60")
    spec = result["speculation"]
    assert spec["accepted"] > 0, "this case wants proposals kept (got %d proposed, none kept)" % spec["proposed"]
    steps = spans(events, name="step", tid=1)
    rows = sum(s[2]["args"]["speculative rows"] for s in steps)
    assert rows == spec["proposed"], "speculative rows %d against %d proposed" % (rows, spec["proposed"])
    accepted = 0
    for i, r in enumerate(result["per_request"]):
        decode = [s[2]["args"] for s in spans(events, name="decode", tid=10 + i)]
        gave = sum(d.get("accepted", 0) + 1 for d in decode)
        accepted += sum(d.get("accepted", 0) for d in decode)
        assert all(d["tokens"] == 1 + d.get("proposed", 0) for d in decode), "request %d: decode rows" % i
        assert gave == len(r["output_ids"]) - 1, "request %d: decode spans give %d tokens, it got %d after the first" % (
            i, gave, len(r["output_ids"]) - 1)
    assert accepted == spec["accepted"], "accepted %d on the timeline against %d" % (accepted, spec["accepted"])


def case_preempted(a, work):
    events, result = serve_sim(a, work, "p", "--kv-blocks", "10", "--block-size", "8", "--ignore-eos")
    assert result["preemptions"] > 0, "this case wants preemptions (got none)"
    preempted = [e for e in events if e["ph"] == "X" and e["name"] == "preempted"]
    assert len(preempted) == result["preemptions"], "%d preempted spans, serve-sim reports %d preemptions" % (
        len(preempted), result["preemptions"])
    used = [e["args"]["used"] for e in events if e["ph"] == "C" and e["name"] == "KV blocks"]
    assert len(used) == result["steps"] and max(used) <= 10, "KV blocks counter: %d samples, max %s" % (
        len(used), max(used, default=None))


def serve_three(a, tl, *extra):
    """Starts pdlab serve, sends 3 requests at once (8 tokens each), stops it
    with SIGTERM; returns the timeline's events and the 3 responses."""
    cmd = [a.pdlab, "serve", "-m", "tiny", "--port", "0", "--threads", "1", "--timeline", tl] + list(extra)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert "listening on http://" in line, "pdlab serve did not start: %r %s" % (line, p.stderr.read())
        url = line.split("listening on ")[1].split()[0] + "/v1/completions"
        out = [None] * 3

        def post(i):
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}).encode()
            req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                out[i] = json.load(r)
        threads = [threading.Thread(target=post, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, "pdlab serve exit %d: %s" % (p.returncode, err)
    assert "timeline:" in err, "no timeline message at the stop: %s" % err
    assert all(out), "a request got no response"
    return load(tl), out


def case_serve(a, work):
    events, responses = serve_three(a, os.path.join(work, "serve.json"))
    requests = spans(events, cat="request")
    tracks = [r for r in requests if r[2]["name"].startswith("request ")]
    assert len(tracks) == 3, "%d request spans for 3 requests" % len(tracks)
    for r in responses:  # every response asked for 8 tokens of the same prompt
        assert r["usage"]["completion_tokens"] == 8 and r["choices"][0]["finish_reason"] == "length", r
    for start, end, e in tracks:
        tid = e["tid"]
        assert e["args"]["output tokens"] == 8 and e["args"]["finish reason"] == "length", e["args"]
        firsts = [x for x in events if x["ph"] == "i" and x["tid"] == tid and x["name"] == "first token"]
        assert len(firsts) == 1, "%s: %d first-token instants" % (e["name"], len(firsts))
        assert len(spans(events, name="decode", tid=tid)) == 7, "%s: decode spans" % e["name"]
        for s in spans(events, tid=tid):
            assert s[2] is e or inside(s, [(start, end, e)]), "%s: %s outside its span" % (e["name"], s[2]["name"])
    steps = spans(events, name="step", tid=1)
    passes = spans(events, name="batch step", tid=1)
    assert steps and len(passes) == len(steps), "%d engine passes in %d steps" % (len(passes), len(steps))
    for s in passes:
        assert inside(s, steps), "an engine pass outside every scheduler step"
    check_nesting(events, ["scheduler"])


def case_serve_serial(a, work):
    events, _ = serve_three(a, os.path.join(work, "serial.json"), "--batching", "serial")
    assert len(spans(events, name="prefill", tid=1)) == 3, "serial: prefill spans"
    assert len(spans(events, name="decode", tid=1)) == 3 * 7, "serial: decode spans"


def case_bad_input(a, work):
    missing = os.path.join(work, "no-such-folder", "t.json")
    cases = [
        ([a.pdlab, "generate", "--prompt-ids", "1,2", "-n", "2", "--timeline", missing], "cannot write"),
        ([a.pdlab, "serve-sim", "--num-requests", "2", "--timeline", work], "cannot write"),
        ([a.pdlab, "serve", "--port", "0", "--timeline", missing], "cannot write"),
        ([a.pdlab, "bench", "-P", "4", "-n", "2", "--device", "cuda", "--timeline", os.path.join(work, "c.json")],
         "CUDA engine"),
        ([a.pdlab, "bench", "-P", "4", "-n", "2", "--precision", "f32,bf16", "--timeline",
          os.path.join(work, "l.json")], "one precision"),
        ([a.pdlab, "generate", "--prompt-ids", "1,2", "--draft", "tiny-draft", "--timeline",
          os.path.join(work, "d.json")], "--timeline"),
        ([a.pdlab, "generate", "--prompt-ids", "1,2", "--timeline", os.path.join(work, "x.json"),
          "--timeline-detail", "all"], "timeline-detail"),
        # A run that fails after the file was opened removes it.
        ([a.pdlab, "generate", "-m", "no-such-model", "--prompt-ids", "1,2", "--timeline",
          os.path.join(work, "m.json")], "not found"),
    ]
    for cmd, word in cases:
        err = run(cmd, expect=2)
        assert word in err, "%s: stderr lacks %r: %s" % (" ".join(cmd[1:]), word, err)
        assert len(err.strip().splitlines()) <= 2, "%s: more than one message: %s" % (" ".join(cmd[1:]), err)
    for name in ("c.json", "l.json", "d.json", "x.json", "m.json"):
        assert not os.path.exists(os.path.join(work, name)), "a refused or failed run left %s" % name


def case_lab02(a, work):
    tl = os.path.join(work, "lab02.json")
    run([a.lab02, "--steps", "3", "--warmup", "1", "--repeats", "1", "--threads", "1", "--timeline", tl])
    events = load(tl)
    check_nesting(events, [])
    # section 1: prefill + 2 decodes (+3 in generate()), section 2: 2 runs of 1 + 3,
    # section 3: a warm-up and a run with the cache (1 + 3 each), one without (4 prefills)
    assert len(spans(events, name="prefill")) == 1 + 1 + 2 + 2 + 4, "lab 02: prefill spans"
    assert len(spans(events, name="decode")) == 2 + 2 + 2 * 3 + 2 * 3, "lab 02: decode spans"


def case_lab06(a, work):
    tl = os.path.join(work, "lab06.json")
    run([a.lab06, "--model", "tiny", "--rates", "50", "--num-requests", "3", "--output-len", "fixed:4", "--quiet",
         "--no-plot", "--threads", "1", "--out", os.path.join(work, "lab06"), "--timeline-detail", "phases",
         "--timeline", tl])
    events = load(tl)
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    replays = sorted(n for n in processes.values() if "batching" in n)
    assert replays == ["continuous batching, 50 req/s", "static batching, 50 req/s"], "processes %s" % processes
    for pid, name in processes.items():
        if "batching" in name:
            requests = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "request"
                        and e["name"].startswith("request ")]
            assert len(requests) == 3, "%s: %d request spans" % (name, len(requests))


def case_lab08(a, work):
    tl = os.path.join(work, "lab08.json")
    run([a.lab08, "--model", "tiny", "--threads", "1", "--budgets", "16,64", "--streams", "2", "--prompt-len", "300",
         "--quiet", "--no-plot", "--out", os.path.join(work, "lab08"), "--timeline-detail", "phases",
         "--timeline", tl])
    events = load(tl)
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    runs = sorted(n for n in processes.values() if "repeat" in n)
    assert runs == ["budget 16, repeat 1", "budget 64, repeat 1", "your controller, repeat 1"], "processes %s" % processes
    for pid, name in processes.items():
        if "repeat" not in name:
            continue
        requests = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["name"].startswith("request ")]
        assert len(requests) == 3, "%s: %d request spans" % (name, len(requests))
        chunks = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 10 + 2
                  and e["name"] in ("prefill", "recompute")]
        first = sum(c["args"]["tokens"] for c in chunks if c["name"] == "prefill")
        again = sum(c["args"]["tokens"] for c in chunks if c["name"] == "recompute")
        assert first + again >= 300 and first <= 300, "%s: the long prompt's chunks: %d tokens, %d recomputed" % (
            name, first, again)
        if name.startswith("budget "):
            budget = int(name.split()[1].rstrip(","))
            for step in (e for e in events if e["ph"] == "X" and e["pid"] == pid and e["name"] == "step"):
                n = step["args"]["decode rows"] + step["args"]["speculative rows"] + step["args"]["prefill tokens"]
                assert n <= budget, "%s: a step of %d tokens" % (name, n)


def run_under_mpirun(lab_dir, program, args):
    """Runs a lab program the way ./kit run does, under its mpirun.sh (as root
    where CI is root, shared memory only); False when mpirun is not installed."""
    import shutil
    if not shutil.which("mpirun"):
        return False
    mpirun_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "labs", lab_dir, "mpirun.sh")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="^tcp")
    p = subprocess.run([mpirun_sh, program] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       env=env)
    assert p.returncode == 0, "%s exit %d: %s" % (lab_dir, p.returncode, p.stderr.decode(errors="replace")[-2000:])
    return True


def case_lab09(a, work):
    tl = os.path.join(work, "lab09.json")
    model = "synthetic:llama,dim=128,ffn=256,layers=4,heads=4,kv_heads=2,vocab=512,ctx=256"
    if not run_under_mpirun("track2/09-disaggregation", a.lab09, ["--model", model,
           "--num-requests", "6", "--rate", "50", "--long-len", "100", "--output-len", "fixed:6", "--threads", "1",
           "--quiet", "--no-plot", "--layers-per-message", "1", "--out", os.path.join(work, "lab09"),
           "--timeline-detail", "phases", "--timeline", tl]):
        print("skip lab09: no mpirun")
        return
    events = load(tl)
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    colocated = [pid for pid, n in processes.items() if n == "colocated"]
    disagg = [pid for pid, n in processes.items() if n.startswith("disaggregated")]
    assert len(colocated) == 1 and len(disagg) == 1, "processes %s" % processes
    pid = disagg[0]
    mine = [e for e in events if e.get("pid") == pid]
    requests = spans(mine, cat="request")
    tracks = [r for r in requests if r[2]["name"].startswith("request ")]
    assert len(tracks) == 6, "%d request spans in the disaggregated process" % len(tracks)
    for start, end, e in tracks:
        tid = e["tid"]
        parts = {s[2]["name"]: s for s in spans(mine, tid=tid) if s[2] is not e}
        for name in ("queued", "prefill + KV", "prefill", "KV after prefill", "decode"):
            assert name in parts, "%s: no %s span" % (e["name"], name)
            assert inside(parts[name], [(start, end, e)]), "%s: %s outside it" % (e["name"], name)
        for name in ("prefill", "KV after prefill"):
            assert inside(parts[name], [parts["prefill + KV"]]), "%s: %s outside prefill + KV" % (e["name"], name)
        assert parts["queued"][1] <= parts["prefill"][0] and parts["KV after prefill"][1] <= parts["decode"][0] + 1, \
            "%s: its stages out of order" % e["name"]
        tokens = [x for x in mine if x["ph"] == "i" and x["tid"] == tid and x["name"] == "token"]
        assert len(tokens) == e["args"]["output tokens"] == 6, "%s: %d token instants" % (e["name"], len(tokens))
    prefills = spans(mine, name="prefill", cat="phase")
    assert len(prefills) == 6, "%d prefill spans on the prefill rank" % len(prefills)
    for (s0, e0, _), (s1, _, _) in zip(prefills, prefills[1:]):
        assert e0 <= s1, "the prefill rank ran two prompts at once"
    counts = [x["args"]["sequences"] for x in mine if x["ph"] == "C"]
    assert counts and min(counts) >= 0 and counts[-1] == 0, "decode counter %s" % counts


def case_lab16(a, work):
    tl = os.path.join(work, "lab16.json")
    if not run_under_mpirun("track4/16-tensor-parallel", a.lab16, ["--ranks", "2", "--model",
           "synthetic:llama,dim=128,ffn=256,layers=2,heads=8,kv_heads=4,vocab=512,ctx=128",
           "--prompt-len", "24", "--steps", "8", "--threads", "1", "--timeline", tl]):
        print("skip lab16: no mpirun")
        return
    events = load(tl)
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    split = [pid for pid, n in processes.items() if n == "2 ranks"]
    assert len(split) == 1, "processes %s" % processes
    for rank in (0, 1):
        mine = [e for e in events if e.get("pid") == split[0] and e.get("tid") == 1 + rank]
        passes = spans(mine, cat="phase")
        reduces = spans(mine, name="all-reduce")
        assert [s[2]["name"] for s in passes] == ["prefill"] + ["decode"] * 7, "rank %d: passes %s" % (
            rank, [s[2]["name"] for s in passes])
        assert len(reduces) == 8 * 2 * 2, "rank %d: %d all-reduce spans, expected 32" % (rank, len(reduces))
        for p0, p1, pe in passes:
            inner = [(r0, r1) for r0, r1, _ in reduces if p0 <= r0 and r1 <= p1]
            assert len(inner) == 4, "rank %d: a pass holds %d all-reduces, expected 4" % (rank, len(inner))
            within(pe["args"]["all-reduce ms"], sum(r1 - r0 for r0, r1 in inner) / 1e6, 0.01, "all-reduce ms")


CASES = [("generate", case_generate), ("bench", case_bench), ("serve_sim", case_serve_sim), ("speculative", case_speculative),
         ("preempted", case_preempted), ("serve", case_serve), ("serve_serial", case_serve_serial), ("bad_input", case_bad_input), ("lab02", case_lab02),
         ("lab06", case_lab06), ("lab08", case_lab08), ("lab09", case_lab09), ("lab16", case_lab16)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdlab", required=True)
    ap.add_argument("--lab02", help="lab 02's program (its case is skipped without it)")
    ap.add_argument("--lab06", help="lab 06's program (its case is skipped without it)")
    ap.add_argument("--lab08", help="lab 08's program (its case is skipped without it)")
    ap.add_argument("--lab09", help="lab 09's program (its case is skipped without it, or without mpirun)")
    ap.add_argument("--lab16", help="lab 16's program (its case is skipped without it, or without mpirun)")
    ap.add_argument("--only", help="comma list of case names or globs")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(n for n, _ in CASES))
        return 0
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for name, case in CASES:
            if a.only and not any(fnmatch.fnmatch(name, p) for p in a.only.split(",")):
                continue
            if name in ("lab02", "lab06", "lab08", "lab09", "lab16") and not getattr(a, name):
                print("SKIP %s (no --%s)" % (name, name))
                continue
            try:
                case(a, work)
                print("ok   %s" % name)
                passed += 1
            except AssertionError as e:
                print("FAIL %s: %s" % (name, e))
                failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
