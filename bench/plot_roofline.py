#!/usr/bin/env python3
"""Draw this machine's roofline with the measured phases on it.

    bench/plot_roofline.py bench/results/<stem> docs/roofline.png

<stem> is a bench/run result (the prefix of its JSON files: <stem>-roofline.json
from `pdlab roofline`, <stem>-*.json from `pdlab bench`). Axes: arithmetic
intensity (FLOP per byte of DRAM traffic) against attained GFLOP/s, both
logarithmic. The roofs are min(peak, bandwidth x intensity) for f32 and bf16;
each point is one measured run at its own intensity (FLOPs / bytes that the
phase must move) and its own attained rate (FLOPs / measured time)."""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    stem, out = sys.argv[1], sys.argv[2]
    roof = json.load(open(f"{stem}-roofline.json"))
    bw = roof["bandwidth_gbps"]
    peaks = {"f32": roof["peak_gflops_f32"], "bf16": roof["peak_gflops_bf16"]}
    colors = {"f32": "tab:blue", "bf16": "tab:orange", "int8": "tab:green"}  # int8: points only, no roof

    # DRAM bandwidth drifts on a shared machine: draw the roof at the lowest and
    # the highest bandwidth any run of this result measured next to its timings.
    bws = [bw]
    for path in glob.glob(f"{stem}-*.json"):
        if not path.endswith("-roofline.json"):
            j = json.load(open(path))
            bws += [j.get("bandwidth_gbps_before", 0), j.get("bandwidth_gbps_after", 0)]
    bws = [b for b in bws if b > 0]
    lo_bw, hi_bw = min(bws), max(bws)

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    xs = [0.05 * 1.1 ** i for i in range(140)]
    for p, peak in peaks.items():
        for b, ls in ((hi_bw, "-"), (lo_bw, "--")):
            ax.plot(xs, [min(peak, b * x) for x in xs], color=colors[p], lw=2 if ls == "-" else 1.2, ls=ls,
                    label=f"{p} roof: {peak:.0f} GFLOP/s peak, {b:.0f} GB/s")
            ridge = peak / b
            ax.axvline(ridge, color=colors[p], ls=":", lw=1)
            ax.annotate(f"ridge {ridge:.1f}", (ridge, peak * (1.08 if ls == "-" else 1.2)), color=colors[p],
                        ha="center", fontsize=8)

    markers = {"pp512": "s", "pp128": "D", "b1": "o", "b4": "^", "b16": "v"}
    seen = set()
    for path in sorted(glob.glob(f"{stem}-*.json")):
        if path.endswith("-roofline.json"):
            continue
        j = json.load(open(path))
        p, model = j["precision"], j["model"].split(":", 1)[-1]
        if model != "bench-llama-125m" or j.get("mode") == "turns":  # turns: the tg runs' twins
            continue  # one model keeps the picture readable; the table has the rest
        points = []
        if j["batch"] == 1 and j.get("prefill_intensity") and j["prefill_ms_median"] > 0:
            key = "pp512" if j["prompt_len"] == 512 else f"pp{j['prompt_len']}"
            points.append((key, j["prefill_intensity"], j["prefill_flops"] / (j["prefill_ms_median"] * 1e6)))
        if j["steps"] > 0 and j["decode_ms_per_token_median"] > 0:
            key = f"b{j['batch']}"
            inten = j["decode_flops_per_step"] / j["decode_bytes_per_step"]
            points.append((key, inten, j["decode_flops_per_step"] / (j["decode_ms_per_token_median"] * 1e6)))
        for key, inten, gflops in points:
            if inten is None:
                continue
            label = f"{p} {key}"
            ax.scatter([inten], [gflops], color=colors[p], marker=markers.get(key, "o"), s=60,
                       edgecolor="black", zorder=5, label=None if label in seen else label)
            ax.annotate(f"{key}", (inten, gflops), textcoords="offset points", xytext=(6, -10), fontsize=8)
            seen.add(label)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic)")
    ax.set_ylabel("attained GFLOP/s")
    ax.set_title(f"Roofline of {roof['hardware']} (DRAM {lo_bw:.0f}-{hi_bw:.0f} GB/s during the runs)\n"
                 f"bench-llama-125m: decode (b = batch) left of the ridge, prefill (pp = prompt tokens) right of it",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
