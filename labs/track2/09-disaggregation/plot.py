#!/usr/bin/python3
"""Lab 09: draws the CSVs the lab program writes (requests.csv, itl.csv) as
disagg.png and disagg.svg: KV bytes moved against prompt length, the transfer's
share of TTFT against prompt length, and the inter-token latency of both modes,
split by whether a long prompt was arriving.

    /usr/bin/python3 labs/track2/09-disaggregation/plot.py lab09-results
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)


def cdf(values):
    v = sorted(values)
    return v, [(i + 1) / len(v) for i in range(len(v))]


def main():
    folder = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    req = plot_style.read_csv(os.path.join(folder, "requests.csv"))
    itl = plot_style.read_csv(os.path.join(folder, "itl.csv"), text=("mode",))
    fig, (kv, share, lat) = plt.subplots(1, 3, figsize=(15, 4.2))
    prompt = [r["prompt_tokens"] for r in req]
    kv.scatter(prompt, [r["kv_bytes"] / 1e6 for r in req], s=14)
    kv.set(xlabel="prompt tokens", ylabel="KV moved (MB)", title="KV bytes per request")
    share.scatter(prompt, [100 * r["exposed_ms"] / max(r["ttft_disagg_ms"], 1e-9) for r in req], s=14)
    share.set(xlabel="prompt tokens", ylabel="% of TTFT", title="transfer after the prefill, share of TTFT")
    for mode, color in (("colocated", "tab:red"), ("disaggregated", "tab:blue")):
        for arriving, style, label in ((1, "-", "long prompt arriving"), (0, ":", "none arriving")):
            v = [r["itl_ms"] for r in itl if r["mode"] == mode and r["long_arriving"] == arriving]
            if v:
                x, y = cdf(v)
                lat.plot(x, y, style, color=color, label=f"{mode}, {label}")
    lat.set(xlabel="inter-token latency (ms)", ylabel="share of gaps", title="decode ITL (CDF)", xscale="log")
    plot_style.style(kv, legend=False)
    plot_style.style(share, legend=False)
    plot_style.style(lat)
    plot_style.save(fig, folder, "disagg")


if __name__ == "__main__":
    main()
