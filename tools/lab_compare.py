#!/usr/bin/env python3
"""Prints one lab's results on the CPU and on the GPU side by side.

Usage: lab_compare.py LAB CPU.json GPU.json

Both files are the --json output of the same lab program run with the same
arguments, once with --device cpu and once with --device cuda (./kit compare
runs both). Rows are the lab's headline numbers; the last column is CPU / GPU
(how many times the GPU is faster for a time, slower for a rate).
"""
import json
import re
import sys

# Per lab: (label, path in the JSON). A path step is a key or a list index;
# "*" expands over a list (one row per element, labelled by `each`).
ROWS = {
    "02": [("prefill median ms", "prefill_ms_median"), ("decode step median ms", "decode_ms_median"),
           ("decode step p90 ms", "decode_ms_p90"), ("generate with the cache ms", "use_cache.with_ms")],
    "04": [("TTFT median ms", "summary.ttft.median"), ("TTFT p99 ms", "summary.ttft.p99"),
           ("TPOT median ms", "summary.tpot.median"), ("ITL p99 ms", "summary.itl.p99"),
           ("E2EL median ms", "summary.e2el.median"), ("queue mean ms", "summary.queue.mean"),
           ("prefill median ms (model)", "summary.prefill.median"),
           ("decode step median ms (model)", "summary.decode_step.median")],
    "05": [("prefill fit a ms/token", "prefill.fit.a_ms"), ("prefill fit b ms/token^2", "prefill.fit.b_ms"),
           ("decode step ms, B = {batch}", "batch.points.*.decode_step_ms"),
           ("decode tokens/s, B = {batch}", "batch.points.*.decode_tokens_per_s"),
           ("prefill tokens/s, B = {batch}", "batch.points.*.prefill_tokens_per_s")],
}
RATES = re.compile(r"per_s|tokens/s")


def lookup(doc, path):
    """[(format fields, value)] for a path; '*' fans out over a list."""
    found = [({}, doc)]
    for step in path.split("."):
        nxt = []
        for fields, node in found:
            if step == "*" and isinstance(node, list):
                nxt += [({**fields, **{k: v for k, v in el.items() if not isinstance(v, (dict, list))}}, el)
                        for el in node if isinstance(el, dict)]
            elif isinstance(node, dict) and step in node:
                nxt.append((fields, node[step]))
        found = nxt
    return [(f, v) for f, v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]


def rows(lab, cpu, gpu):
    for label, path in ROWS.get(lab, []):
        a, b = lookup(cpu, path), lookup(gpu, path)
        for (fa, va), (_, vb) in zip(a, b):
            yield label.format(**fa) if fa else label, va, vb, bool(RATES.search(path))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    lab = re.match(r"\d+", sys.argv[1].split("/")[-1]).group(0)
    cpu, gpu = (json.load(open(p)) for p in sys.argv[2:])
    print(f"lab {lab}: the same workload on both devices")
    print(f"  cpu   {cpu.get('hardware', '?')}")
    print(f"  cuda  {gpu.get('hardware', '?')}")
    table = list(rows(lab, cpu, gpu))
    if not table:
        print(f"  (no headline numbers known for lab {lab}; compare the two JSON files)")
        return
    width = max(len(r[0]) for r in table)
    print(f"  {'':<{width}} {'cpu':>12} {'cuda':>12} {'gpu speed-up':>13}")
    no_ratio = False
    for label, a, b, rate in table:
        if a > 0 and b > 0:
            speed = f"{(b / a if rate else a / b):>12.2f}x"
        else:
            speed, no_ratio = f"{'n/a':>13}", True
        print(f"  {label:<{width}} {a:>12.4g} {b:>12.4g} {speed}")
    if no_ratio:
        print("  n/a: a value of zero or below has no speed-up; a prefill fit term <= 0 means the time did not\n"
              "  grow that way at these lengths (on a GPU, a prompt of 32 and one of 512 cost about the same)")


if __name__ == "__main__":
    main()
