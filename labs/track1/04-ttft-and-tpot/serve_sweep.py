#!/usr/bin/python3
"""Lab 04, section 8: the real server under rising load.

    python3 labs/track1/04-ttft-and-tpot/serve_sweep.py [--rates 1,4,16] [--batching continuous]

Starts `pdlab serve` on 127.0.0.1 (a free port), and for each rate replays one
trace with `pdlab loadgen` (Poisson arrivals, streaming). For every rate it
reads two sides of the same requests:

  client  loadgen's TTFT (from sending the request to the first chunk arriving):
          queueing + HTTP + prefill + streaming, what a user sees
  server  /metrics before and after: the server's TTFT (from accepting the
          request to choosing its first token), its queue time, and the
          model-side part alone (from the scheduler admitting the request to its
          first token; with --batching serial: the prefill pass)

It prints one row per rate, writes serve_sweep.csv, and draws TTFT p50/p99
against the rate (serve_sweep.png and .svg) when matplotlib is there. The
server is stopped with SIGTERM at the end, whatever happens.
"""

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
COLUMNS = ["rate", "completed", "req_per_s", "out_tok_per_s", "client_ttft_p50_ms", "client_ttft_p99_ms",
           "client_ttft_mean_ms", "server_ttft_mean_ms", "server_queue_mean_ms", "model_ttft_mean_ms",
           "client_tpot_p50_ms", "client_itl_p50_ms", "client_itl_p99_ms", "client_e2el_p50_ms"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdlab", default=os.path.join(ROOT, "build", "src", "pdlab", "pdlab"))
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--threads", type=int, default=0, help="the server's OpenMP threads (0: all cores)")
    ap.add_argument("--batching", choices=["continuous", "serial"], default="continuous")
    ap.add_argument("--rates", default="1,4,16", help="requests per second, comma-separated (inf: a burst)")
    ap.add_argument("--num-requests", type=int, default=48)
    ap.add_argument("--prompt-len", default="fixed:64")
    ap.add_argument("--output-len", default="fixed:32")
    ap.add_argument("--out", default="serve_sweep", help="folder for the CSV and the plot")
    a = ap.parse_args()
    try:
        a.rates = [float(r) for r in a.rates.split(",")]
    except ValueError:
        ap.error(f"--rates {a.rates!r}: give numbers separated by commas, e.g. 1,4,16")
    if not os.access(a.pdlab, os.X_OK):
        ap.error(f"no pdlab at {a.pdlab}: build it (./kit build) or give --pdlab")
    return a


def start_server(a):
    """pdlab serve on a free port: (process, base URL)."""
    cmd = [a.pdlab, "serve", "--model", a.model, "--port", "0", "--batching", a.batching]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"(http://127\.0\.0\.1:\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"pdlab serve did not start: {line!r} {proc.stderr.read()[-400:]!r}")
    print(line.strip(), file=sys.stderr)
    return proc, m.group(1)


def scrape(url):
    """The histogram sums and counts of /metrics: {name: (sum, count)}."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for name in ("time_to_first_token", "request_queue_time", "request_prefill_time"):
        s = float(re.search(rf"pdlab_{name}_seconds_sum (\S+)", text).group(1))
        n = float(re.search(rf"pdlab_{name}_seconds_count (\S+)", text).group(1))
        out[name] = (s, n)
    return out


def mean_ms(before, after, name):
    """The mean, in ms, of the observations `name` gained between two scrapes."""
    ds = after[name][0] - before[name][0]
    dn = after[name][1] - before[name][1]
    return 1000 * ds / dn if dn else float("nan")


def run_rate(a, url, rate, work, num_requests):
    out = os.path.join(work, f"rate-{rate}.json")
    before = scrape(url)
    run = subprocess.run([a.pdlab, "loadgen", "--url", url, "--rate", "inf" if rate == float("inf") else str(rate),
                          "--num-requests", str(num_requests), "--prompt-len", a.prompt_len,
                          "--output-len", a.output_len, "--ignore-eos", "--json", out],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"loadgen at rate {rate} failed: {run.stderr[-400:]}")
    after = scrape(url)
    with open(out) as f:
        j = json.load(f)
    return {"rate": rate, "completed": j["completed"], "req_per_s": j["request_throughput"],
            "out_tok_per_s": j["output_throughput"], "client_ttft_p50_ms": j["median_ttft_ms"],
            "client_ttft_p99_ms": j["p99_ttft_ms"], "client_ttft_mean_ms": j["mean_ttft_ms"],
            "server_ttft_mean_ms": mean_ms(before, after, "time_to_first_token"),
            "server_queue_mean_ms": mean_ms(before, after, "request_queue_time"),
            "model_ttft_mean_ms": mean_ms(before, after, "request_prefill_time"),
            "client_tpot_p50_ms": j["median_tpot_ms"], "client_itl_p50_ms": j["median_itl_ms"],
            "client_itl_p99_ms": j["p99_itl_ms"], "client_e2el_p50_ms": j["median_e2el_ms"]}


def plot(rows, a):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is missing (apt install python3-matplotlib)", file=sys.stderr)
        return
    finite = [r for r in rows if r["rate"] != float("inf")]
    x = [r["rate"] for r in finite]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [r["client_ttft_p50_ms"] for r in finite], "o-", label="client TTFT p50")
    ax.plot(x, [r["client_ttft_p99_ms"] for r in finite], "s-", label="client TTFT p99")
    ax.plot(x, [r["model_ttft_mean_ms"] for r in finite], "^--", label="model-side mean (admitted -> 1st token)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arrival rate (requests/s)")
    ax.set_ylabel("ms")
    ax.set_title(f"pdlab serve --batching {a.batching}, {a.model}: TTFT against load")
    ax.legend()
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out, f"serve_sweep.{ext}"))
    print(f"plot: {os.path.join(a.out, 'serve_sweep.png')} and .svg", file=sys.stderr)


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    proc, url = start_server(a)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as work:
            run_rate(a, url, float("inf"), work, 8)  # warm-up: first-touch memory and kernel set-up stay out of the rows
            for rate in a.rates:
                print(f"rate {rate} req/s: {a.num_requests} requests...", file=sys.stderr)
                rows.append(run_rate(a, url, rate, work, a.num_requests))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    print(" ".join(f"{c:>10.10}" for c in COLUMNS))
    for r in rows:
        print(" ".join(f"{r[c]:>10.1f}" for c in COLUMNS))
    with open(os.path.join(a.out, "serve_sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    plot(rows, a)


if __name__ == "__main__":
    main()
