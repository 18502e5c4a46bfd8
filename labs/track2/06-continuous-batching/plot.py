#!/usr/bin/python3
"""Lab 06: draws rates.csv (written by the lab program) as rates.png and rates.svg:
p50 and p99 TTFT, and output throughput, against the request rate, static and
continuous batching side by side.

    /usr/bin/python3 labs/track2/06-continuous-batching/plot.py lab06-results
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["mode"], []).append({k: (v if k == "mode" else float(v)) for k, v in r.items()})
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    rows = load(os.path.join(folder, "rates.csv"))
    fig, (ttft, tput) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, style in (("static", "--"), ("continuous", "-")):
        pts = sorted(rows.get(mode, []), key=lambda r: r["rate"])
        rate = [p["rate"] for p in pts]
        ttft.plot(rate, [p["p50_ttft_ms"] for p in pts], style, marker="o", label=mode + " p50")
        ttft.plot(rate, [p["p99_ttft_ms"] for p in pts], style, marker="^", label=mode + " p99")
        tput.plot(rate, [p["output_throughput"] for p in pts], style, marker="o", label=mode)
    ttft.set(xlabel="request rate (req/s)", ylabel="TTFT (ms)", title="time to first token", yscale="log")
    tput.set(xlabel="request rate (req/s)", ylabel="output tokens / s", title="throughput")
    for ax in (ttft, tput):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(folder, "rates." + ext))


if __name__ == "__main__":
    main()
