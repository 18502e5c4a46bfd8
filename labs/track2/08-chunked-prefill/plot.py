#!/usr/bin/python3
"""Lab 08: draws budgets.csv (written by the lab program) as budgets.png and
budgets.svg: the streams' p50, p90 and p99 ITL and longest stall against the
newcomer's TTFT, one point per token budget (the trade-off chunked prefill makes)
and a star for your controller's p90 (the row "slo", held to a p90 target), and
the output throughput of each row.

    /usr/bin/python3 labs/track2/08-chunked-prefill/plot.py lab08-results
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def main():
    folder = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    rows = plot_style.read_csv(os.path.join(folder, "budgets.csv"), text=("budget",))  # "unchunked" is a budget
    fig, (trade, tput) = plt.subplots(1, 2, figsize=(11, 4.2))
    fixed = [r for r in rows if r["budget"] != "slo"]  # the lines join the fixed budgets only
    ttft = [r["ttft_ms"] for r in fixed]
    trade.plot(ttft, [r["p50_itl_ms"] for r in fixed], ":s", label="streams' p50 ITL while prefilling")
    trade.plot(ttft, [r["p90_itl_ms"] for r in fixed], "-.d", label="streams' p90 ITL while prefilling")
    trade.plot(ttft, [r["p99_itl_ms"] for r in fixed], "-o", label="streams' p99 ITL while prefilling")
    trade.plot(ttft, [r["max_stall_ms"] for r in fixed], "--^", label="streams' longest stall")
    for r in rows:
        if r["budget"] == "slo":
            trade.plot([r["ttft_ms"]], [r["p90_itl_ms"]], "*", markersize=14, label="your controller's p90 ITL")
        at = r["p90_itl_ms"] if r["budget"] == "slo" else r["p99_itl_ms"]
        trade.annotate(r["budget"], (r["ttft_ms"], at), textcoords="offset points", xytext=(4, 4),
                       fontsize=8)
    trade.set(xlabel="newcomer's TTFT (ms)", ylabel="ms", title="stream latency against the newcomer's TTFT",
              yscale="log")
    labels = [r["budget"] for r in rows]
    tput.bar(labels, [r["output_throughput"] for r in rows])
    tput.set(xlabel="token budget of a step", ylabel="output tokens / s", title="throughput")
    plot_style.style(trade)
    plot_style.style(tput, legend=False)
    plot_style.save(fig, folder, "budgets")


if __name__ == "__main__":
    main()
