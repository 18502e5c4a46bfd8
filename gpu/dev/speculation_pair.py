#!/usr/bin/env python3
"""One trace served without and with speculation, side by side.

    pdlab serve-sim ... --json off.json
    pdlab serve-sim ... --speculative-k K --json on.json
    gpu/dev/speculation_pair.py off.json on.json

Prints the steps, duration and output throughput of each run, the proposed
and accepted tokens of the second, and how many requests got the same output
ids; for the others, where they part first. Speculation keeps greedy
decoding's tokens as long as a verify step's rows get the logits a plain
decode row would, as f32 on the CPU does. A product of more rows may sum in
another order or take another kernel (on the GPU, cuBLAS where a plain
decode step's 1 to 4 rows take the GEMV; bf16 on the CPU parts too), which
moves the logits a little: at a near tie of the top two the ids may part,
and the texts differ from there (gpu.model.speculative_serving_matches_plain
checks on the tiny model that they part only at a near tie). Ends with
RESULT lines for gpu/check.sh. Exit 2 when a file cannot be read or the two
runs are not of one trace.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"speculation_pair: cannot read {path}: {e} (give two pdlab serve-sim --json results)", file=sys.stderr)
        sys.exit(2)


def first_divergence(a, b):
    """The first index where the id lists differ (the shorter one's length if one is a prefix), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    off, on = load(sys.argv[1]), load(sys.argv[2])
    req_off = sorted(off["per_request"], key=lambda r: r["index"])
    req_on = sorted(on["per_request"], key=lambda r: r["index"])
    if [r["index"] for r in req_off] != [r["index"] for r in req_on]:
        print(f"speculation_pair: requests {len(req_off)} against {len(req_on)}, or other indices: not one trace",
              file=sys.stderr)
        sys.exit(2)
    spec = on["speculation"]
    for name, r in (("off", off), ("k = %d" % spec["k"], on)):
        m = r["metrics"]
        print(f"speculation {name:>6}: {r['steps']} steps, {m['duration']:.3f} s, "
              f"{m['output_throughput']:.0f} output tokens/s, mean TPOT {m['mean_tpot_ms']:.3f} ms")
    print(f"proposed {spec['proposed']}, accepted {spec['accepted']} ({100 * spec['acceptance_rate']:.1f}%), "
          f"{spec['tokens_per_verifying_row']:.2f} tokens per verifying row")
    same = 0
    for a, b in zip(req_off, req_on):
        d = first_divergence(a["output_ids"], b["output_ids"])
        if d is None:
            same += 1
        else:
            print(f"request {a['index']}: output ids part at token {d} of {len(a['output_ids'])}")
    print(f"same output ids: {same} of {len(req_off)} requests")
    print(f"RESULT same_requests={same}/{len(req_off)}")
    print(f"RESULT steps={off['steps']}/{on['steps']}")
    print(f"RESULT duration_s={off['metrics']['duration']:.3f}/{on['metrics']['duration']:.3f}")


if __name__ == "__main__":
    main()
