#!/usr/bin/env python3
"""What ./kit builds for each command exists, and is only that (issue 49).

    kit_targets.py --kit KIT --build BUILD

./kit names its targets by path in the build folder: a lab's program as
labs/trackN/NN-name/NN-name, pdlab as src/pdlab/pdlab, the grader as
tools/grade/pdlab-grade. Each must be a ninja target (a lab whose program is
not configured here, 09 and 16 without Open MPI, is left out: ./kit says so
itself), and ninja's plan for lab 03 (a dry run: nothing is built) must hold
its program and not the unit tests, pdlab or the other labs.
"""
import argparse
import glob
import os
import subprocess
import sys


def ninja(build, *args):
    return subprocess.run(["ninja", "-C", build, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    bad = []
    for d in sorted(glob.glob(os.path.join(a.kit, "labs/track*/[0-9][0-9]-*/"))):
        rel = os.path.relpath(d, a.kit).rstrip("/")
        target = f"{rel}/{os.path.basename(rel)}"
        if ninja(a.build, "-t", "query", target).returncode != 0 and not os.path.exists(os.path.join(d, "mpirun.sh")):
            bad.append(f"{target}: not a ninja target, but ./kit run {os.path.basename(rel)[:2]} builds it")
    for target in ("src/pdlab/pdlab", "tools/grade/pdlab-grade"):
        if ninja(a.build, "-t", "query", target).returncode != 0:
            bad.append(f"{target}: not a ninja target")

    lab03 = "labs/track1/03-cache-and-gqa/03-cache-and-gqa"
    # -t commands lists every command the target needs, built or not.
    plan = ninja(a.build, "-t", "commands", lab03)
    if plan.returncode != 0:
        bad.append(f"ninja -t commands {lab03} failed: {plan.stderr.strip()}")
    for outsider in ("tests/unit_tests", "src/pdlab/pdlab", "labs/track1/04-ttft-and-tpot/04-ttft-and-tpot",
                     "lab03_tests"):
        if f" {outsider} " in plan.stdout or f"-o {outsider}" in plan.stdout:
            bad.append(f"building lab 03 also builds {outsider}")
    if f"-o {lab03} " not in plan.stdout:
        bad.append(f"ninja's plan for lab 03 does not link {lab03}")
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print("ok: the kit's targets exist, and lab 03's build is its own")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
