#!/usr/bin/python3
"""Draws lab 13's k sweep from DIR/sweep.csv into DIR/speculative.png and .svg.

    /usr/bin/python3 labs/track3/13-speculative-decoding/plot.py lab13-results

Left: speed-up over plain decoding against k. Right: tokens per target pass,
measured and as expected_tokens_per_pass predicts from the acceptance rate,
with the acceptance rate on a second axis. Needs matplotlib (Debian:
apt-get install python3-matplotlib); exits 4 without it, 2 without the CSV.
"""
import csv
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py DIR (the lab's --out folder, holding sweep.csv)")
    path = os.path.join(sys.argv[1], "sweep.csv")
    if not os.path.isfile(path):
        print(f"plot.py: {path} not found: run the lab with --out {sys.argv[1]} first", file=sys.stderr)
        sys.exit(2)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is missing (apt-get install python3-matplotlib)", file=sys.stderr)
        sys.exit(4)
    with open(path, newline="") as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    k = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(k, [r["speedup"] for r in rows], "o-", label="speculative / plain tokens/s")
    left.axhline(1.0, color="gray", lw=0.8, ls="--", label="plain decoding")
    left.set_xlabel("k (draft tokens per round)")
    left.set_ylabel("speed-up")
    left.set_title("Measured speed-up (greedy, identical tokens)")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.plot(k, [r["tokens_per_pass"] for r in rows], "o-", label="tokens per target pass (measured)")
    right.plot(k, [r["predicted"] for r in rows], "s--", label="expected_tokens_per_pass(acceptance, k)")
    right.set_xlabel("k (draft tokens per round)")
    right.set_ylabel("tokens per target pass")
    right.set_ylim(bottom=0)
    right.grid(alpha=0.3)
    twin = right.twinx()
    twin.plot(k, [r["acceptance"] for r in rows], "^:", color="tab:green", label="acceptance rate")
    twin.set_ylim(0, 1.05)
    twin.set_ylabel("acceptance rate")
    lines = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    labels = right.get_legend_handles_labels()[1] + twin.get_legend_handles_labels()[1]
    right.legend(lines, labels, fontsize=8, loc="lower right")
    right.set_title("What each target pass yields")
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(sys.argv[1], f"speculative.{ext}"), dpi=120, bbox_inches="tight")
    print("  speculative.png, speculative.svg")


if __name__ == "__main__":
    main()
