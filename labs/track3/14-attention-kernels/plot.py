#!/usr/bin/python3
"""Draws lab 14's sweeps from the CSV files in DIR (PNG and SVG next to them).

    /usr/bin/python3 labs/track3/14-attention-kernels/plot.py lab14-results

prefill.csv and decode.csv: time and scratch of both kernels against the length
(log-log: a quadratic is a line of slope 2, a constant is flat), with the GPU
pair's prefill_gpu.csv and decode_gpu.csv (--device cuda or both) dashed on
the same axes; tiles.csv: the tiled kernel's time against the tile size, the naive
kernel's at that length as a line. Needs matplotlib (Debian: apt-get
install python3-matplotlib); exits 4 without it, 2 when DIR holds none of the files.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


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
        plot_style.style(ax)
    plot_style.save(fig, out_dir, phase)
    plt.close(fig)


def plot_tiles(plt, rows, out_dir):
    fig, ax = plt.subplots(figsize=(6, 4.2))
    labels = [f"{int(r['Br'])}x{int(r['Bc'])}" for r in rows]
    ax.bar(labels, [r["tiled_ms"] for r in rows], color="C1", label="tiled (yours)")
    if "naive_ms" in rows[0]:  # older CSV files lack it
        ax.axhline(rows[0]["naive_ms"], color="C0", linestyle="--", label="naive, same length")
    ax.set(xlabel="tile Br x Bc", ylabel="prefill time (ms, median)", title="tiled kernel against tile size")
    plot_style.style(ax)
    plot_style.save(fig, out_dir, "tiles")
    plt.close(fig)


def main():
    out_dir = plot_style.out_folder("usage: plot.py DIR")
    names = ("prefill", "decode", "tiles", "prefill_gpu", "decode_gpu")
    found = {n: os.path.join(out_dir, f"{n}.csv") for n in names}
    found = {n: p for n, p in found.items() if os.path.exists(p)}
    if not found:
        print(f"plot.py: none of {', '.join(n + '.csv' for n in names)} in {out_dir}", file=sys.stderr)
        sys.exit(2)
    plt = plot_style.pyplot()
    print(f"plots in {out_dir}:")
    for phase in ("prefill", "decode"):
        by_device = {suffix: plot_style.read_csv(found[phase + suffix]) for suffix, *_ in DEVICES if phase + suffix in found}
        if by_device:
            plot_lengths(plt, by_device, phase, out_dir)
    if "tiles" in found:
        plot_tiles(plt, plot_style.read_csv(found["tiles"]), out_dir)


if __name__ == "__main__":
    main()
