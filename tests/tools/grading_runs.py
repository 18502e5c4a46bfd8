#!/usr/bin/env python3
"""The grading scenarios, one after another, as one meson test (tools.grading).

Each scenario grades a small made-up class with pdlab-grade in one shared work
folder: the first builds the engine there and the others reuse that build, so
no two may run at once. As ten meson tests they had to be is_parallel: false,
and meson runs such a test alone: for about 740 s of a 1,226 s test run on two
cores one test ran and the other slot waited (docs/build.md, "CI's time"). As
one test they keep one slot while the rest of the suite uses the other.

    grading_runs.py --grader G --kit K --work W [--only NAME[,NAME...]] [--absent-mpi]

The scenarios (in this order; the first builds the engine):
  fake_class          perfect, starter, broken, crashing and slow lab 03 students
  hostile_class       students who attack the grader (grade_hostile_class.py)
  class_08 ... 17     an honest, a wrong, a forging and a forbidden student of
                      labs 08, 09, 14, 15, 16, 17 (grade_track2_class.py)
  hostile_15 ... 17   track 4's attacks (grade_track4_hostile.py)
--absent-mpi: this build has no Open MPI, so lab 09 cannot build: class_09 is
skipped. Prints each scenario's result and time, and a failing one's output.
Exit 0 when none failed, 1 when one did, 77 when every one was skipped, 2 on
bad usage.
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SKIP = 77


def scenarios(absent_mpi):
    """(name, script, extra arguments) for each scenario, in the order they run."""
    rows = [("fake_class", "grade_fake_class.py", []),
            ("hostile_class", "grade_hostile_class.py", [])]
    for lab in ("08", "09", "14", "15", "16", "17"):
        extra = ["--lab", lab]
        if lab == "09" and absent_mpi:
            extra += ["--absent", "Open MPI"]
        rows.append((f"class_{lab}", "grade_track2_class.py", extra))
    for lab in ("15", "16", "17"):
        rows.append((f"hostile_{lab}", "grade_track4_hostile.py", ["--lab", lab]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    ap.add_argument("--absent-mpi", action="store_true")
    args = ap.parse_args()

    rows = scenarios(args.absent_mpi)
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {name for name, _, _ in rows})
        if unknown:
            ap.error(f"unknown scenario(s) {', '.join(unknown)}; the scenarios: "
                     + ", ".join(name for name, _, _ in rows))
        rows = [r for r in rows if r[0] in wanted]

    common = ["--grader", args.grader, "--kit", args.kit, "--work", args.work]
    counts = {"ok": 0, "FAIL": 0, "skip": 0}
    for name, script, extra in rows:
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, str(HERE / script)] + common + extra,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        verdict = "ok" if run.returncode == 0 else "skip" if run.returncode == SKIP else "FAIL"
        counts[verdict] += 1
        print(f"{verdict:4}  {name:14} {time.monotonic() - t0:6.1f} s", flush=True)
        if verdict != "ok":
            last = run.stdout.strip().splitlines()[-1:] if verdict == "skip" else [run.stdout]
            print("\n".join("      " + line for line in "\n".join(last).splitlines()), flush=True)
    print(f"grading scenarios: {counts['ok']} passed, {counts['FAIL']} failed, {counts['skip']} skipped")
    if counts["FAIL"]:
        return 1
    return SKIP if counts["skip"] == len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
