#!/usr/bin/python3
"""Lab 09: draws the CSVs the lab program writes (requests.csv, itl.csv) as
disagg.png and disagg.svg: KV bytes moved against prompt length, the transfer's
share of TTFT against prompt length, and the inter-token latency of both modes,
split by whether a long prompt was arriving.

    /usr/bin/python3 labs/track2/09-disaggregation/plot.py lab09-results
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def cdf(values):
    v = sorted(values)
    return v, [(i + 1) / len(v) for i in range(len(v))]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    req = rows(os.path.join(folder, "requests.csv"))
    itl = rows(os.path.join(folder, "itl.csv"))
    fig, (kv, share, lat) = plt.subplots(1, 3, figsize=(15, 4.2))
    prompt = [float(r["prompt_tokens"]) for r in req]
    kv.scatter(prompt, [float(r["kv_bytes"]) / 1e6 for r in req], s=14)
    kv.set(xlabel="prompt tokens", ylabel="KV moved (MB)", title="KV bytes per request")
    share.scatter(prompt, [100 * float(r["exposed_ms"]) / max(float(r["ttft_disagg_ms"]), 1e-9) for r in req], s=14)
    share.set(xlabel="prompt tokens", ylabel="% of TTFT", title="transfer after the prefill, share of TTFT")
    for mode, color in (("colocated", "tab:red"), ("disaggregated", "tab:blue")):
        for arriving, style, label in (("1", "-", "long prompt arriving"), ("0", ":", "none arriving")):
            v = [float(r["itl_ms"]) for r in itl if r["mode"] == mode and r["long_arriving"] == arriving]
            if v:
                x, y = cdf(v)
                lat.plot(x, y, style, color=color, label=f"{mode}, {label}")
    lat.set(xlabel="inter-token latency (ms)", ylabel="share of gaps", title="decode ITL (CDF)", xscale="log")
    for ax in (kv, share, lat):
        ax.grid(True, alpha=0.3)
    lat.legend(fontsize=8)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(folder, "disagg." + ext))


if __name__ == "__main__":
    main()
