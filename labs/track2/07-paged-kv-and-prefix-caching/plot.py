#!/usr/bin/python3
"""Lab 07: draws memory.csv and ttft.csv (written by the lab program) as
memory.png and memory.svg: on the left, KV bytes over the steps of the run
without prefix caching (used, reserved by the paged cache, reserved by
contiguous slots); on the right, every request's TTFT without and with
prefix caching.

    /usr/bin/python3 labs/track2/07-paged-kv-and-prefix-caching/plot.py lab07-results
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import plot_style  # noqa: E402  (labs/common/plot_style.py)

MIB = 1024.0 * 1024.0


def main():
    folder = plot_style.out_folder(__doc__)
    plt = plot_style.pyplot()
    memory = plot_style.read_groups(os.path.join(folder, "memory.csv"), "run")  # "off": no prefix caching, "on"
    ttft = plot_style.read_groups(os.path.join(folder, "ttft.csv"), "run")
    fig, (mem, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    steps = memory.get("off", [])
    x = [r["step"] for r in steps]
    mem.plot(x, [r["contiguous_bytes"] / MIB for r in steps], "--", label="contiguous slots (reserved)")
    mem.plot(x, [r["paged_reserved_bytes"] / MIB for r in steps], "-", label="paged blocks (reserved)")
    mem.plot(x, [r["used_bytes"] / MIB for r in steps], ":", label="positions cached (used)")
    mem.set(xlabel="scheduler step", ylabel="KV MiB", title="KV memory, no prefix caching", yscale="log")
    for run, style, label in (("off", "o", "no prefix caching"), ("on", "^", "prefix caching")):
        pts = ttft.get(run, [])
        lat.plot([p["request"] for p in pts], [p["ttft_ms"] for p in pts], style, label=label)
    lat.set(xlabel="request (arrival order)", ylabel="TTFT (ms)", title="time to first token", yscale="log")
    for ax in (mem, lat):
        plot_style.style(ax)
    plot_style.save(fig, folder, "memory")


if __name__ == "__main__":
    main()
