#!/usr/bin/python3
"""pdlab bench with several precisions: their decode steps taken in turns (issue 16).

    /usr/bin/python3 tests/python/test_bench_turns.py --pdlab build/src/pdlab/pdlab

On the bundled tiny model, P = 8, 6 decode steps, 2 measured runs:

  entries      one per listed precision, in order; 12 positive step samples each,
               the median and the distance from the floor computed from them
  ratios       one per pair, slow = the precision reading more bytes per step; the
               speed-up is recomputed here as the median of the per-round ratios
               (sample k of each entry is round k) and must match
  tokens       each precision's greedy tokens equal `pdlab generate --greedy` of the
               same prompt in that precision alone: the engines kept their own caches
  batch        -B 2: two rows of greedy tokens per precision, each token in the vocabulary
  single       one precision still writes the one-run JSON (no entries)
  wait_note    with --threads, one precision and several: a note on stderr when
               the threads were set to wait passively at start (as on a busy
               machine: the environment of that second start, given here), and
               none when OMP_WAIT_POLICY=PASSIVE was the user's own

No torch needed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PRECISIONS = ["f32", "bf16", "int8"]
P, STEPS, REPEATS = 8, 6, 2
TINY_VOCAB = 1497


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        sys.exit("FAIL: %s\nexit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout.decode(errors="replace")


def bench(pdlab, work, name, precision, *extra):
    path = os.path.join(work, name + ".json")
    run([pdlab, "bench", "-m", "tiny", "--precision", precision, "-P", str(P), "-n", str(STEPS), "--warmup", "1",
         "-r", str(REPEATS), "--threads", "1", "--probe-seconds", "0.05", "--peak-gflops", "50",
         "--json", path] + list(extra))
    with open(path) as f:
        return json.load(f)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def check_entries(j, problems):
    names = [e["precision"] for e in j["entries"]]
    if names != PRECISIONS:
        problems.append("entries %s, expected %s" % (names, PRECISIONS))
    for e in j["entries"]:
        ms, name = e["decode_step_ms"], e["precision"]
        if len(ms) != STEPS * REPEATS or min(ms) <= 0:
            problems.append("%s: %d samples (expected %d), smallest %s" % (name, len(ms), STEPS * REPEATS, min(ms)))
            continue
        if not close(e["decode_ms_per_token_median"], statistics.median(ms)):
            problems.append("%s: median %s, samples give %s" % (name, e["decode_ms_per_token_median"],
                                                               statistics.median(ms)))
        if e["decode_floor_ms"] <= 0 or not close(e["decode_vs_floor"], statistics.median(ms) / e["decode_floor_ms"]):
            problems.append("%s: floor %s ms, x floor %s" % (name, e["decode_floor_ms"], e["decode_vs_floor"]))
        if e["final_cache_len"] != P + STEPS:
            problems.append("%s: final cache length %d, expected %d" % (name, e["final_cache_len"], P + STEPS))


def check_ratios(j, problems):
    by_name = {e["precision"]: e for e in j["entries"]}
    pairs = sorted((r["slow"], r["fast"]) for r in j["ratios"])
    if pairs != sorted([("f32", "bf16"), ("f32", "int8"), ("bf16", "int8")]):
        problems.append("ratios for %s" % pairs)
    for r in j["ratios"]:
        slow, fast = by_name[r["slow"]], by_name[r["fast"]]
        per_round = [a / b for a, b in zip(slow["decode_step_ms"], fast["decode_step_ms"])]
        want = {"speedup": statistics.median(per_round),
                "speedup_of_medians": slow["decode_ms_per_token_median"] / fast["decode_ms_per_token_median"],
                "bytes_ratio": slow["decode_bytes_per_step"] / fast["decode_bytes_per_step"]}
        for key, value in want.items():
            if not close(r[key], value):
                problems.append("%s/%s %s: %s, the entries give %s" % (r["slow"], r["fast"], key, r[key], value))
        if r["bytes_ratio"] <= 1 or r["rounds"] != STEPS * REPEATS:
            problems.append("%s/%s: bytes ratio %s, %s rounds" % (r["slow"], r["fast"], r["bytes_ratio"], r["rounds"]))


def check_tokens(pdlab, work, j, problems):
    prompt = j["prompt_ids"][0]
    for e in j["entries"]:
        path = os.path.join(work, "generate-%s.json" % e["precision"])
        run([pdlab, "generate", "-m", "tiny", "--precision", e["precision"], "--threads", "1", "--greedy",
             "--ignore-eos", "-n", str(STEPS + 1), "--prompt-ids", ",".join(map(str, prompt)), "--json", path])
        with open(path) as f:
            alone = json.load(f)["generated_ids"]
        if e["greedy_ids"] != [alone]:
            problems.append("%s: greedy tokens in turns %s, alone %s" % (e["precision"], e["greedy_ids"], alone))


def check_batch(j, problems):
    for e in j["entries"]:
        rows = e["greedy_ids"]
        if len(rows) != 2 or any(len(r) != STEPS + 1 or not all(0 <= t < TINY_VOCAB for t in r) for r in rows):
            problems.append("-B 2 %s: greedy tokens %s" % (e["precision"], rows))


def check_single(j, problems):
    if "entries" in j or len(j["decode_step_ms"]) != STEPS * REPEATS:
        problems.append("one precision: not the one-run JSON (%s)" % sorted(j))


def check_wait_note(pdlab, problems):
    """The environment pdlab gives itself when it starts again on a busy machine."""
    note = "note: OpenMP threads sleep between parallel regions"
    for marker, want in (("1.5,passive", 1), ("1.5", 0)):
        for precision in ("f32", "f32,bf16"):
            env = dict(os.environ, PDLAB_OPENMP_FROM_LOAD=marker, OMP_WAIT_POLICY="PASSIVE")
            p = subprocess.run([pdlab, "bench", "-m", "tiny", "--precision", precision, "-P", "4", "-n", "2",
                                "--warmup", "0", "-r", "1", "--threads", "1", "--probe-seconds", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
            got = p.stderr.decode(errors="replace").count(note)
            if p.returncode != 0 or got != want:
                problems.append("marker %s, %s: exit %d, %d notes (want %d)" % (marker, precision, p.returncode, got,
                                                                               want))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdlab", required=True)
    a = ap.parse_args()
    pdlab = os.path.abspath(a.pdlab)
    results = {}  # check name -> its problems
    with tempfile.TemporaryDirectory(prefix="pdlab_turns_") as work:
        turns = bench(pdlab, work, "turns", ",".join(PRECISIONS))
        if turns.get("mode") != "turns" or len(turns.get("entries", [])) != len(PRECISIONS):
            sys.exit("FAIL: no turns JSON: %s" % sorted(turns))
        for name, check in (("entries", lambda p: check_entries(turns, p)),
                            ("ratios", lambda p: check_ratios(turns, p)),
                            ("tokens", lambda p: check_tokens(pdlab, work, turns, p)),
                            ("batch", lambda p: check_batch(bench(pdlab, work, "b2", ",".join(PRECISIONS), "-B", "2"), p)),
                            ("single", lambda p: check_single(bench(pdlab, work, "single", "bf16"), p)),
                            ("wait_note", lambda p: check_wait_note(pdlab, p))):
            results[name] = []
            check(results[name])
    for name, problems in results.items():
        print("%s %s%s" % ("FAIL" if problems else "PASS", name, ": " + "; ".join(problems) if problems else ""))
    failed = sum(1 for p in results.values() if p)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
