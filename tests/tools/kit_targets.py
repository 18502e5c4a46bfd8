#!/usr/bin/env python3
"""What ./kit builds for each command exists, and is only that (issue 49).

    kit_targets.py --kit KIT --build BUILD

./kit names its targets by path in the build folder: a lab's program as
labs/trackN/NN-name/NN-name, pdlab as src/pdlab/pdlab, the grader as
tools/grade/pdlab-grade. Each must be a ninja target (a lab whose program is
not configured here, 09 and 16 without Open MPI, is left out: ./kit says so
itself), and ninja's plan for lab 03 (a dry run: nothing is built) must hold
its program and not the unit tests, pdlab or the other labs. tools/suite-targets
(./kit test SUITE, CI's sanitizer build) must list what the selected suites run
and nothing else, and refuse an unknown suite with exit 2.
"""
import argparse
import glob
import os
import subprocess
import sys


def ninja(build, *args):
    return subprocess.run(["ninja", "-C", build, *args], capture_output=True, text=True)


def suite_targets(kit, build, *args):
    return subprocess.run([sys.executable, os.path.join(kit, "tools/suite-targets"), build, *args],
                          capture_output=True, text=True)


def check_suite_targets(kit, build):
    bad = []
    asan = suite_targets(kit, build, "engine", "labs", "--no-suite", "isa", "cli")
    listed = set(asan.stdout.split())
    if asan.returncode != 0 or "tests/unit_tests" not in listed \
            or "labs/track1/03-cache-and-gqa/lab03_tests" not in listed:
        bad.append(f"suite-targets engine labs: {asan.returncode} {sorted(listed)} {asan.stderr}")
    for outsider in ("src/pdlab/pdlab", "tests/tools/lab03_hardcoder_tests", "tools/grade/pdlab-grade"):
        if outsider in listed:
            bad.append(f"suite-targets engine labs --no-suite isa cli lists {outsider}")
    # The handout tests run programs found through the build folder (their depends
    # name them); they exist only in a build of the solutions (exit 2 elsewhere).
    handouts = suite_targets(kit, build, "handouts")
    wanted = {"src/pdlab/pdlab", "labs/track1/03-cache-and-gqa/03-cache-and-gqa"}
    if handouts.returncode == 0 and not wanted <= set(handouts.stdout.split()):
        bad.append(f"suite-targets handouts lacks pdlab or lab 03's program: {handouts.stdout.split()}")
    if suite_targets(kit, build, "layers").stdout:
        bad.append("suite-targets layers lists targets: its tests run scripts on the sources")
    unknown = suite_targets(kit, build, "no-such-suite")
    if unknown.returncode != 2 or "no suite no-such-suite" not in unknown.stderr:
        bad.append(f"suite-targets no-such-suite: exit {unknown.returncode}, {unknown.stderr!r}")
    return bad


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
    bad += check_suite_targets(a.kit, a.build)
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print("ok: the kit's targets exist, and lab 03's build is its own")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
