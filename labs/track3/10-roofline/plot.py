#!/usr/bin/env python3
"""Lab 10: draw the roofline the lab program measured, with its phases on it.

    python3 plot.py lab10-results

Reads <folder>/roofline.json (written by the lab program) and writes
<folder>/roofline.png and .svg: intensity (FLOP per byte) against GFLOP/s,
both logarithmic; the roof min(peak, bandwidth x intensity); the ridge point;
each timed run at its counted intensity and measured rate; and, per model, the
batch at which decode reaches the ridge."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def draw_roof(ax, ceil):
    bw, peak, ridge = ceil["bandwidth_gbps"], ceil["peak_gflops"], ceil["ridge"]
    xs = [0.01 * 1.1 ** i for i in range(121)]  # 0.01 to about 900 FLOP/byte
    ax.plot(xs, [min(peak, bw * x) for x in xs], color="black", lw=2,
            label=f"roof: {bw:.0f} GB/s, {peak:.0f} GFLOP/s ({ceil['precision']})")
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:.1f} FLOP/byte", (ridge, peak * 1.15), ha="center", fontsize=8)


def draw_model(ax, model, color):
    name = model["model"].split(":", 1)[-1]
    for pt in model["points"]:
        marker = "s" if pt["phase"] == "prefill" else "o"
        label = "P" if pt["phase"] == "prefill" else f"B={pt['batch']}"
        ax.scatter([pt["intensity"]], [pt["attained_gflops"]], color=color, marker=marker, s=50,
                   edgecolor="black", zorder=5)
        ax.annotate(label, (pt["intensity"], pt["attained_gflops"]), textcoords="offset points",
                    xytext=(5, -10), fontsize=7, color=color)
    turn = model["turn"]["batch"]
    text = f"{name}: decode never reaches the ridge" if turn == 0 else \
        f"{name}: decode turns compute-bound at B={turn}"
    ax.plot([], [], color=color, marker="o", ls="", label=text)


def main():
    folder = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    with open(os.path.join(folder, "roofline.json")) as f:
        j = json.load(f)
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    draw_roof(ax, j["ceilings"])
    for model, color in zip(j["models"], ["tab:blue", "tab:orange", "tab:green", "tab:red"]):
        draw_model(ax, model, color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic, your counts)")
    ax.set_ylabel("attained GFLOP/s (your FLOPs / measured time)")
    ax.set_title(f"Roofline of {j['hardware']}\nsquares: prefill of {j['prompt_len']} tokens; "
                 f"circles: one decode step at batch B", fontsize=10)
    plot_style.style(ax, legend=False)
    ax.legend(fontsize=8, loc="lower right")
    plot_style.save(fig, folder, "roofline")


if __name__ == "__main__":
    main()
