#!/usr/bin/python3
"""Lab 06: draws rates.csv (written by the lab program) as rates.png and rates.svg:
p50 and p99 TTFT, and output throughput, against the request rate, static and
continuous batching side by side.

    /usr/bin/python3 labs/track2/06-continuous-batching/plot.py lab06-results
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def main():
    folder = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    rows = plot_style.read_groups(os.path.join(folder, "rates.csv"), "mode")
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
        plot_style.style(ax)
    plot_style.save(fig, folder, "rates")


if __name__ == "__main__":
    main()
