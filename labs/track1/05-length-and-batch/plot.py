#!/usr/bin/python3
"""Draws lab 05's sweeps from the CSV files in DIR (one PNG and one SVG per sweep).

    /usr/bin/python3 labs/track1/05-length-and-batch/plot.py lab05-results

Needs matplotlib (Debian: apt-get install python3-matplotlib). Draws whichever
of the four CSV files it finds; exits 4 when matplotlib is missing, 2 when DIR
holds none of them.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def finish(ax, xlabel, ylabel, title, legend=False, from_zero=True):
    """Labels, title, the kit's grid; the y axis from 0 unless from_zero is False."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if from_zero:
        ax.set_ylim(bottom=0)
    plot_style.style(ax, legend)


def median_with_p90(ax, x, rows, fmt, label):
    """The median times as points, each with a bar up to its p90."""
    up = [max(0.0, r["p90_ms"] - r["median_ms"]) for r in rows]
    ax.errorbar(x, [r["median_ms"] for r in rows], yerr=[[0.0] * len(up), up], fmt=fmt, color="C0", capsize=3,
                label=label)


def plot_prefill(plt, rows, out_dir):
    P = [r["prompt_len"] for r in rows]
    # The fit's coefficients, recovered from its columns.
    last = rows[-1]
    a = last["fit_linear_ms"] / last["prompt_len"]
    b = last["fit_quadratic_ms"] / last["prompt_len"] ** 2
    c0 = last["fit_ms"] - last["fit_linear_ms"] - last["fit_quadratic_ms"]
    xs = [P[0] + (P[-1] - P[0]) * i / 200 for i in range(201)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    median_with_p90(ax1, P, rows, "o", "measured (median; bar up to p90)")
    ax1.plot(xs, [c0 + a * x + b * x * x for x in xs], color="C1",
             label=f"fit c0 + aP + bP²  (b = {b:.3g} ms/token²)")
    ax1.plot(xs, [c0 + a * x for x in xs], "--", color="C2", label=f"c0 + aP only  (a = {a:.3g} ms/token)")
    finish(ax1, "prompt length P (tokens)", "prefill time (ms)", "Prefill time against prompt length", legend=True)
    ax2.plot(P, [1000 * r["ms_per_token"] for r in rows], "o-", color="C3")
    finish(ax2, "prompt length P (tokens)", "prefill time per prompt token (µs)",
           "Per prompt token: flat where time is linear in P,\nrising where attention (∝ P per token) counts")
    plot_style.save(fig, out_dir, "prefill_vs_prompt_len")


def plot_decode(plt, rows, out_dir):
    L = [r["cache_len"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    median_with_p90(ax, L, rows, "o-", "median; bar up to p90")
    finish(ax, "cache length read by the step (tokens)", "one decode step (ms)",
           "Decode step against cache length\n(weights: same every step; cache: grows with length)", legend=True)
    plot_style.save(fig, out_dir, "decode_vs_cache_len")


def plot_output(plt, rows, out_dir):
    n = [r["output_len"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot(n, [r["total_ms"] for r in rows], "o-", color="C0", label="total (prefill + decode steps)")
    ax.plot(n, [r["ttft_ms"] for r in rows], "s--", color="C1", label="time to first token")
    finish(ax, "output tokens", "time (ms)",
           "Total time against output length\n(prefill once, then one decode step per token)", legend=True)
    plot_style.save(fig, out_dir, "total_vs_output_len")


def plot_batch(plt, rows, out_dir):
    B = [r["batch"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(B, [r["decode_tokens_per_s"] for r in rows], "o-", color="C0", label="decode")
    ax1.plot(B, [r["prefill_tokens_per_s"] for r in rows], "s-", color="C1", label="prefill")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    finish(ax1, "batch size B", "throughput (tokens/s, all sequences)", "Throughput against batch size",
           legend=True, from_zero=False)
    ax2.plot(B, [r["per_request_ms_per_token"] for r in rows], "o-", color="C2")
    ax2.set_xscale("log", base=2)
    finish(ax2, "batch size B", "decode step = each request's ms per token",
           "What each request pays for sharing the step")
    for ax in (ax1, ax2):
        ax.set_xticks(B)
        ax.set_xticklabels([str(int(b)) for b in B])
        ax.xaxis.set_minor_locator(plt.NullLocator())
    plot_style.save(fig, out_dir, "batch")


def main():
    out_dir = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    plots = [("prefill_vs_prompt_len.csv", plot_prefill), ("decode_vs_cache_len.csv", plot_decode),
             ("total_vs_output_len.csv", plot_output), ("batch.csv", plot_batch)]
    drawn = 0
    print(f"plot.py: drawing into {out_dir}")
    for name, fn in plots:
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            continue
        rows = plot_style.read_csv(path)
        if rows:
            fn(plt, rows, out_dir)
            plt.close("all")
            drawn += 1
    if drawn == 0:
        print(f"plot.py: no lab 05 CSV files in {out_dir}: run 05-length-and-batch first", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
