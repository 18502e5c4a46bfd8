"""What the suites that run pdlab case by case share (test_reference.py,
test_bad_input.py): the options --pdlab, --only, --list and --timeout, and the
cases and the program they choose.
"""
import argparse
import fnmatch
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_PDLAB = os.path.join(ROOT, "build", "src", "pdlab", "pdlab")


def case_parser(doc, timeout):
    """An argument parser with --pdlab, --only, --list and --timeout (seconds a pdlab run)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdlab", default=DEFAULT_PDLAB)
    ap.add_argument("--only", help="comma-separated case names or globs")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=int, default=timeout)
    return ap


def chosen_cases(cases, only):
    """The cases (tuples, the name first) whose names match one of --only's globs;
    all of them without --only; exit naming the cases when none matches."""
    if not only:
        return cases
    pats = only.split(",")
    chosen = [c for c in cases if any(fnmatch.fnmatchcase(c[0], p) for p in pats)]
    if not chosen:
        sys.exit("no case matches --only %s; cases: %s" % (only, ", ".join(c[0] for c in cases)))
    return chosen


def pdlab_program(path):
    """--pdlab's absolute path; exit when it is not an executable."""
    if not os.access(path, os.X_OK):
        sys.exit("pdlab not found or not executable: %s" % path)
    return os.path.abspath(path)
