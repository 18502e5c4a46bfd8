#!/usr/bin/python3
"""Draws lab 14's sweeps from the CSV files in DIR (PNG and SVG next to them).

    /usr/bin/python3 labs/track3/14-attention-kernels/plot.py lab14-results

prefill.csv and decode.csv: time and scratch of both kernels against the length
(log-log: a quadratic is a line of slope 2, a constant is flat), with the GPU
pair's prefill_gpu.csv and decode_gpu.csv (--device cuda or both) dashed on
the same axes; tiles.csv: the tiled kernel's time against the tile size. Needs matplotlib (Debian: apt-get
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


# Each device's lines: (CSV suffix, line style, label prefix, tiled scratch label).
DEVICES = (("", "-", "", "tiled: Br x Bc floats + Br states"),
           ("_gpu", "--", "GPU ", "GPU tiled: one block's shared memory"))


def plot_lengths(plt, by_device, phase, out_dir):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for suffix, style, prefix, tiled_scratch in DEVICES:
        rows = by_device.get(suffix)
        if not rows:
            continue
        S = [r["length"] for r in rows]
        ax1.plot(S, [r["naive_ms"] for r in rows], "o" + style, color="C0",
                 label=prefix + "naive (scores in memory)")
        ax1.plot(S, [r["tiled_ms"] for r in rows], "s" + style, color="C1", label=prefix + "tiled (online softmax)")
        ax2.plot(S, [r["naive_scratch_bytes"] for r in rows], "o" + style, color="C0",
                 label=prefix + "naive: T x S floats")
        ax2.plot(S, [r["tiled_scratch_bytes"] for r in rows], "s" + style, color="C1", label=tiled_scratch)
    ax1.set(xscale="log", yscale="log", xlabel="sequence length S", ylabel="time per call (ms, median)",
            title=f"{phase}: time")
    ax2.set(xscale="log", yscale="log", xlabel="sequence length S", ylabel="scratch per CPU thread or GPU block (bytes)",
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
    names = ("prefill", "decode", "tiles", "prefill_gpu", "decode_gpu")
    found = {n: os.path.join(out_dir, f"{n}.csv") for n in names}
    found = {n: p for n, p in found.items() if os.path.exists(p)}
    if not found:
        print(f"plot.py: none of {', '.join(n + '.csv' for n in names)} in {out_dir}", file=sys.stderr)
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
        by_device = {suffix: read(found[phase + suffix]) for suffix, *_ in DEVICES if phase + suffix in found}
        if by_device:
            plot_lengths(plt, by_device, phase, out_dir)
    if "tiles" in found:
        plot_tiles(plt, read(found["tiles"]), out_dir)


if __name__ == "__main__":
    main()
