#!/usr/bin/env python3
"""Where a GPU run's kernel time goes, from an Nsight Compute CSV.

    ncu --csv --metrics gpu__time_duration.sum [--launch-skip N --launch-count M] PROGRAM ... >ncu.csv
    gpu/dev/profile_summary.py ncu.csv [--steps S | --step-kernel NAME]

Prints one row per kernel name: launches, mean and total microseconds, share
of the profiled kernels' time; with the number of decode steps the window
covers (--steps, or --step-kernel: the launches of a kernel that runs once a
step, e.g. argmax_kernel), each kernel's microseconds per step and the sum, to set beside the
step time the bench measured: the difference is time the GPU spent between
kernels (launch gaps, host work). Reads both ncu CSV layouts: one row per
(launch, metric) with "Metric Name"/"Metric Value", or one column per metric.
"""
import argparse
import csv
import sys
from collections import defaultdict

METRIC = "gpu__time_duration.sum"
TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}


def launches(path):
    """(kernel name, microseconds) per profiled launch."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # drops ncu's ==PROF== lines
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header or "Kernel Name" not in header:
        sys.exit(f"{path}: no ncu CSV header with \"Kernel Name\" in it (was ncu run with --csv?)")
    name = header.index("Kernel Name")
    if "Metric Name" in header:
        metric, unit, value = (header.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
        for row in reader:
            if len(row) > value and row[metric] == METRIC:
                yield row[name], float(row[value].replace(",", "")) * TO_US.get(row[unit], 1.0)
    else:
        col = header.index(METRIC)
        rows = list(reader)
        scale = TO_US.get(rows[0][col], None) if rows else None  # raw page: the first row holds units
        for row in rows[1:] if scale is not None else rows:
            yield row[name], float(row[col].replace(",", "")) * (scale or 1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=float, default=0, help="decode steps the profiled window covers")
    ap.add_argument("--step-kernel", help="a kernel launched once per decode step: its launches count the steps")
    a = ap.parse_args()
    per = defaultdict(list)
    for kernel, us in launches(a.csv):
        per[kernel.split("(")[0][:60]].append(us)
    if not per:
        sys.exit(f"{a.csv}: no {METRIC} values")
    if a.step_kernel:
        a.steps = sum(len(v) for k, v in per.items() if a.step_kernel in k)
        print(f"{a.steps:.0f} decode steps in the window ({a.step_kernel} launches)")
    total = sum(sum(v) for v in per.values())
    n = sum(len(v) for v in per.values())
    print(f"{n} kernel launches, {total:.1f} us of kernel time")
    step_col = " us/step" if a.steps else ""
    print(f"  {'kernel':<60} {'launches':>8} {'mean us':>8} {'total us':>9} {'share':>6}{step_col}")
    for kernel, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        row = f"  {kernel:<60} {len(v):>8} {sum(v) / len(v):>8.2f} {sum(v):>9.1f} {100 * sum(v) / total:>5.1f}%"
        print(row + (f" {sum(v) / a.steps:>8.1f}" if a.steps else ""))
    if a.steps:
        print(f"  kernel time per decode step: {total / a.steps:.1f} us")


if __name__ == "__main__":
    main()
