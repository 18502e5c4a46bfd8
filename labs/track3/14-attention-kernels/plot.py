#!/usr/bin/python3
"""Draws lab 14's sweeps from the CSV files in DIR (PNG and SVG next to them).

    /usr/bin/python3 labs/track3/14-attention-kernels/plot.py lab14-results

prefill.csv and decode.csv: time and scratch of both kernels against the length
(log-log: a quadratic is a line of slope 2, a constant is flat); tiles.csv: the
tiled kernel's time against the tile size. Needs matplotlib (Debian: apt-get
install python3-matplotlib); exits 4 without it, 2 when DIR holds none of the files.
"""
import csv
import os
import sys


def read(path):
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def save(fig, out_dir, name):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out_dir, f"{name}.{ext}"), dpi=120, bbox_inches="tight")
    print(f"  {name}.png, {name}.svg")


def plot_lengths(plt, rows, phase, out_dir):
    S = [r["length"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(S, [r["naive_ms"] for r in rows], "o-", label="naive (scores in memory)")
    ax1.plot(S, [r["tiled_ms"] for r in rows], "s-", label="tiled (online softmax)")
    ax1.set(xscale="log", yscale="log", xlabel="sequence length S", ylabel="time per call (ms, median)",
            title=f"{phase}: time")
    ax2.plot(S, [r["naive_scratch_bytes"] for r in rows], "o-", label="naive: T x S floats")
    ax2.plot(S, [r["tiled_scratch_bytes"] for r in rows], "s-", label="tiled: Br x Bc floats + Br states")
    ax2.set(xscale="log", yscale="log", xlabel="sequence length S", ylabel="scratch per thread (bytes)",
            title=f"{phase}: scratch")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both")
    save(fig, out_dir, phase)
    plt.close(fig)


def plot_tiles(plt, rows, out_dir):
    fig, ax = plt.subplots(figsize=(6, 4.2))
    labels = [f"{int(r['Br'])}x{int(r['Bc'])}" for r in rows]
    ax.bar(labels, [r["tiled_ms"] for r in rows], color="C1")
    ax.set(xlabel="tile Br x Bc", ylabel="prefill time (ms, median)", title="tiled kernel against tile size")
    ax.grid(alpha=0.3, axis="y")
    save(fig, out_dir, "tiles")
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py DIR")
    out_dir = sys.argv[1]
    found = {n: os.path.join(out_dir, f"{n}.csv") for n in ("prefill", "decode", "tiles")}
    found = {n: p for n, p in found.items() if os.path.exists(p)}
    if not found:
        print(f"plot.py: no prefill.csv, decode.csv or tiles.csv in {out_dir}", file=sys.stderr)
        sys.exit(2)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is missing (apt-get install python3-matplotlib)", file=sys.stderr)
        sys.exit(4)
    print(f"plots in {out_dir}:")
    for phase in ("prefill", "decode"):
        if phase in found:
            plot_lengths(plt, read(found[phase]), phase, out_dir)
    if "tiles" in found:
        plot_tiles(plt, read(found["tiles"]), out_dir)


if __name__ == "__main__":
    main()
