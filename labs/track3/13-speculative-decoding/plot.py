#!/usr/bin/python3
"""Draws lab 13's k sweep from DIR/sweep.csv into DIR/speculative.png and .svg.

    /usr/bin/python3 labs/track3/13-speculative-decoding/plot.py lab13-results

Left: speed-up over plain decoding against k. Right: tokens per verify pass,
measured and as expected_tokens_per_pass predicts from the per-token acceptance alpha,
with both acceptance rates on a second axis. Needs matplotlib (Debian:
apt-get install python3-matplotlib); exits 4 without it, 2 without the CSV.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def main():
    folder = plot_style.out_folder(__doc__)
    path = os.path.join(folder, "sweep.csv")
    if not os.path.isfile(path):
        print(f"plot.py: {path} not found: run the lab with --out {folder} first", file=sys.stderr)
        sys.exit(2)
    plt = plot_style.pyplot()
    rows = plot_style.read_csv(path)
    k = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(k, [r["speedup"] for r in rows], "o-", label="speculative / plain tokens/s")
    left.axhline(1.0, color="gray", lw=0.8, ls="--", label="plain decoding")
    left.set_xlabel("k (draft tokens per round)")
    left.set_ylabel("speed-up")
    left.set_title("Measured speed-up (greedy, identical tokens)")
    left.set_ylim(bottom=0)
    plot_style.style(left)
    right.plot(k, [r["tokens_per_pass"] for r in rows], "o-", label="tokens per verify pass (measured)")
    right.plot(k, [r["predicted"] for r in rows], "s--", label="expected_tokens_per_pass(alpha, k)")
    right.set_xlabel("k (draft tokens per round)")
    right.set_ylabel("tokens per verify pass")
    right.set_ylim(bottom=0)
    plot_style.style(right, legend=False)  # one legend for both of its y axes, below
    twin = right.twinx()
    twin.plot(k, [r["acceptance"] for r in rows], "^:", color="tab:green", label="kept / proposed")
    twin.plot(k, [r["alpha"] for r in rows], "v:", color="tab:olive", label="alpha = kept / judged")
    twin.set_ylim(0, 1.05)
    twin.set_ylabel("acceptance")
    lines = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    labels = right.get_legend_handles_labels()[1] + twin.get_legend_handles_labels()[1]
    right.legend(lines, labels, fontsize=8, loc="lower right")
    right.set_title("What each target pass yields")
    plot_style.save(fig, folder, "speculative")


if __name__ == "__main__":
    main()
