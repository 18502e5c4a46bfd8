#!/usr/bin/env python3
"""Every lab handout says how long it takes, and docs/instructors.md's table agrees.

    lab_hours.py --kit KIT

Each labs/trackN/NN-name/README.md carries one line "**Time:** about T hours: R to
read, E for the exercise and its tests, Q for the runs and the report" with
R + E + Q = T; the table in docs/instructors.md ("How long each lab takes a
student") has one row per lab with the same four numbers. Exit 1 naming each lab
whose line is missing, does not add up, or differs from the table.
"""
import argparse
import glob
import os
import re
import sys

LINE = re.compile(r"\*\*Time:\*\* about ([\d.]+) hours: ([\d.]+) to read, ([\d.]+) for the exercise and its "
                  r"tests, ([\d.]+) for the runs and the report")
ROW = re.compile(r"^\| \d \| Lab (\d\d): [^|]+\| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kit", required=True)
    kit = ap.parse_args().kit
    table = {m.group(1): tuple(float(g) for g in m.groups()[1:])
             for m in ROW.finditer(open(os.path.join(kit, "docs", "instructors.md")).read())}
    problems = []
    handouts = sorted(glob.glob(os.path.join(kit, "labs", "track*", "[0-9]*", "README.md")))
    for path in handouts:
        lab = os.path.basename(os.path.dirname(path))[:2]
        m = LINE.search(re.sub(r"\s+", " ", open(path, encoding="utf-8").read()))
        if not m:
            problems.append(f"lab {lab}: its handout has no '**Time:** about T hours: ...' line")
            continue
        total, read, exercise, report = (float(g) for g in m.groups())
        if abs(read + exercise + report - total) > 1e-9:
            problems.append(f"lab {lab}: {read} + {exercise} + {report} is not the {total} hours it says")
        if table.get(lab) != (read, exercise, report, total):
            problems.append(f"lab {lab}: docs/instructors.md's row {table.get(lab)} differs from the handout's "
                            f"{(read, exercise, report, total)}")
    for p in problems:
        print(p)
    print(f"{len(handouts)} handouts, {len(table)} rows in docs/instructors.md, {len(problems)} problems")
    return 1 if problems or not handouts else 0


if __name__ == "__main__":
    sys.exit(main())
