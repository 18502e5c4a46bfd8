#!/usr/bin/env python3
"""Grades a tiny fake class with pdlab-grade and checks the gradebook.

Students (one lab: 03 when it has a rubric, else the first lab that has one):
  perfect  the reference solution, with a changed exercise.hpp (the kit's must be used)
  starter  the student starter as handed out
  broken   the starter plus a line that does not compile
  crash    every TODO_EXERCISE replaced by a null-pointer write
  slow     every TODO_EXERCISE replaced by an endless loop
Expected: perfect gets full marks, starter 0 on every test check, broken
"compile error" with 0, crash 0 with a signal in its report, slow "timeout";
and the run completes (exit 0).

Usage: grade_fake_class.py --grader build/tools/grade/pdlab-grade --kit . --work DIR [--lab NN]
Exit 77 (meson: skipped) when no lab has a rubric yet.
"""
import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandbox_work import sandbox_work, skip_without_sandbox

CRASH_PRELUDE = """// fake student: crashes in every exercise function
#include <cstdlib>
static int* volatile pdlab_fake_null = nullptr;
#define PDLAB_FAKE_CRASH(hint) do { (void)(hint); *pdlab_fake_null = 1; ::std::abort(); } while (0)
"""
SLOW_PRELUDE = """// fake student: never returns from an exercise function
#define PDLAB_FAKE_SPIN(hint) for (volatile unsigned long pdlab_fake_i = 0;; pdlab_fake_i = pdlab_fake_i + 1) {}
"""


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run_grader(cmd, out, asserted=True):
    """Runs the pdlab-grade command line `cmd` (whose --out is `out`), printing its
    last lines and how long it took: exit 77 where it cannot sandbox, a failure
    unless it exits 0 (when `asserted`). The gradebook's rows by student, and
    each one's report (a formula-like name is led by ' in the gradebook, not in
    its report's file name)."""
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    skip_without_sandbox(p.stdout)
    print(p.stdout[-6000:])
    print(f"grading took {time.time() - t0:.0f} s, exit status {p.returncode}")
    if asserted and p.returncode != 0:
        fail(f"pdlab-grade exited with {p.returncode}")
    rows = {}
    if (out / "gradebook.csv").is_file():
        with open(out / "gradebook.csv", newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
    for n in sorted(rows):
        print(f"  {n:14} {rows[n]['total']:>5}/{rows[n]['max']}  {rows[n]['status']}")
    reports = {n: out / "reports" / f"{n.removeprefix(chr(39))}.md" for n in rows}
    return rows, {n: r.read_text() for n, r in reports.items() if r.is_file()}


def lab_and_solution(kit: Path, number):
    """Lab `number`'s folder and its solution's, or exit 77 (meson: skipped) where
    the kit has no solution and rubric for it (a student's handout)."""
    lab = pick_lab(kit, number)
    if lab is None:
        print(f"lab {number} has no solution and rubric in {kit}/solutions (a student handout?): skipped")
        sys.exit(77)
    return lab, kit / "solutions" / lab.parent.name / lab.name


def pick_lab(kit: Path, wanted):
    labs = []
    for lab in sorted(kit.glob("labs/track*/[0-9]*-*")):
        sol = kit / "solutions" / lab.parent.name / lab.name
        if (sol / "rubric.json").is_file() and (sol / "exercise.cpp").is_file() and (lab / "exercise.cpp").is_file():
            labs.append(lab)
    if wanted:
        labs = [l for l in labs if l.name.startswith(wanted + "-")]
    preferred = [l for l in labs if l.name.startswith("03-")]
    return (preferred or labs or [None])[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lab")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    kit = Path(a.kit).resolve()
    a.grader = str(Path(a.grader).resolve())
    a.work = str(sandbox_work(a.work))
    lab = pick_lab(kit, a.lab)
    if lab is None:
        print("no lab has solutions/<track>/<lab>/rubric.json yet: skipped")
        return 77
    number = lab.name.split("-")[0]
    sol = kit / "solutions" / lab.parent.name / lab.name
    rubric = json.loads((sol / "rubric.json").read_text())
    checks = rubric["checks"]
    max_points = sum(c["points"] for c in checks)
    test_checks = [c["name"] for c in checks if c["kind"] == "test"]
    print(f"lab {lab.parent.name}/{lab.name}: {len(checks)} checks, {max_points:g} points")

    tmp = Path(tempfile.mkdtemp(prefix="pdlab-fake-class."))
    try:
        subs = tmp / "submissions"
        starter = (lab / "exercise.cpp").read_text()
        if "TODO_EXERCISE(" not in starter:
            fail(f"{lab}/exercise.cpp has no TODO_EXERCISE(: cannot make the crash and slow students")

        def student(name, text, extra=None):
            d = subs / name
            d.mkdir(parents=True)
            (d / "exercise.cpp").write_text(text)
            for fname, content in (extra or {}).items():
                (d / fname).write_text(content)

        hpp = (lab / "exercise.hpp").read_text() if (lab / "exercise.hpp").is_file() else None
        student("perfect", (sol / "exercise.cpp").read_text(),
                {"exercise.hpp": hpp + "\n// a student's change that the grader must ignore\n"} if hpp else None)
        student("starter", starter)
        student("broken", starter + "\nint pdlab_fake_broken = this_name_is_not_declared_anywhere;\n")
        student("crash", CRASH_PRELUDE + starter.replace("TODO_EXERCISE(", "PDLAB_FAKE_CRASH("))
        student("slow", SLOW_PRELUDE + starter.replace("TODO_EXERCISE(", "PDLAB_FAKE_SPIN("))

        out = tmp / "grades"
        cmd = [a.grader, str(subs), "--lab", number, "--kit", str(kit), "--out", str(out),
               "--work", a.work, "--timeout", "5", "--jobs", "2", "--threads", "1"]
        print("$", " ".join(cmd), flush=True)
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        skip_without_sandbox(p.stdout)
        print(p.stdout)
        print(f"grading took {time.time() - t0:.0f} s")
        if p.returncode != 0:
            fail(f"pdlab-grade exited with {p.returncode}")
        for name in ("perfect", "starter", "broken", "crash", "slow"):
            if not re.search(rf"\[\d+/5\] {name}: .*points", p.stdout):
                fail(f"no progress line for {name}")

        with open(out / "gradebook.csv", newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        if sorted(rows) != ["broken", "crash", "perfect", "slow", "starter"]:
            fail(f"gradebook rows: {sorted(rows)}")
        header = list(next(csv.reader(open(out / "gradebook.csv"))))
        want_header = ["student"] + [c["name"] for c in checks] + ["total", "max", "status", "seed"]
        if header != want_header:
            fail(f"gradebook header {header}, expected {want_header}")
        seeds = {r["seed"] for r in rows.values()}
        if len(seeds) != 1 or not seeds.pop().isdigit():
            fail("the gradebook must record one seed")
        report = {n: (out / "reports" / f"{n}.md").read_text() for n in rows}

        def total(n):
            return float(rows[n]["total"])

        r = rows["perfect"]
        if total("perfect") != max_points or r["status"] != "ok" or float(r["max"]) != max_points:
            fail(f"perfect: {r}")
        if "exercise.hpp differs" not in report["perfect"] and hpp:
            fail("perfect's report does not say its exercise.hpp was replaced by the kit's")

        r = rows["starter"]
        for c in test_checks:
            if float(r[c]) != 0:
                fail(f"starter scored {r[c]} on test check {c}: that check passes with the starter")
        if "not implemented" not in r["status"]:
            fail(f"starter status: {r['status']}")

        r = rows["broken"]
        if r["status"] != "compile error" or total("broken") != 0:
            fail(f"broken: {r}")
        if "this_name_is_not_declared_anywhere" not in report["broken"]:
            fail("broken's report does not show the compiler error")

        r = rows["crash"]
        if total("crash") != 0 or "crash" not in r["status"]:
            fail(f"crash: {r}")
        if not re.search(r"signal \d+ \(SIG", report["crash"]):
            fail("crash's report does not name the signal")

        r = rows["slow"]
        if total("slow") != 0 or "timeout" not in r["status"]:
            fail(f"slow: {r}")
        if "timed out" not in report["slow"]:
            fail("slow's report does not say it timed out")

        if not (out / "grading.md").is_file():
            fail("no grading.md")
        for n in rows:
            if "PDLAB_TEST_SEED=" not in report[n] and n != "broken":
                fail(f"{n}'s report does not say how to reproduce with the seed")
        print("ok: the fake class graded as expected")
        for n in sorted(rows):
            print(f"  {n:8} {rows[n]['total']:>5}/{rows[n]['max']}  {rows[n]['status']}")
        return 0
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
