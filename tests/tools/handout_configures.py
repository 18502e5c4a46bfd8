#!/usr/bin/env python3
"""tools/handout makes a student copy without solutions/ that configures.

Configure only (meson setup), to stay fast; the copy's default `exercises`
option must resolve to the starters. Untracked files are included
(--include-untracked) so that a working tree with a lab not yet committed is
tested as it stands; in a clean checkout that is the same as the default.
Usage: handout_configures.py --kit DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    a = ap.parse_args()
    kit = Path(a.kit).resolve()
    if shutil.which("git") is None:  # e.g. the container, which copies the tree without git
        print("git is not installed (tools/handout copies a git checkout): skipped")
        return 77
    if subprocess.run(["git", "-C", str(kit), "rev-parse"], capture_output=True).returncode != 0:
        print("the kit is not a git checkout: skipped")
        return 77
    tmp = Path(tempfile.mkdtemp(prefix="pdlab-handout-test."))
    try:
        dest = tmp / "student-kit"
        p = subprocess.run([str(kit / "tools" / "handout"), "--include-untracked", str(dest)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        print(p.stdout)
        if p.returncode != 0:
            fail(f"tools/handout exited with {p.returncode}")
        if "Next steps" not in p.stdout:
            fail("tools/handout did not print the next steps")
        if (dest / "solutions").exists():
            fail("the copy has solutions/")
        for junk in ("build", ".git"):
            if (dest / junk).exists():
                fail(f"the copy has {junk}/")
        if not os.access(dest / "kit", os.X_OK):
            fail("./kit is not executable in the copy")
        for lab in sorted(kit.glob("labs/track*/[0-9]*-*/exercise.cpp")):
            rel = lab.relative_to(kit)
            if not (dest / rel).is_file():
                fail(f"the copy lacks {rel}")
            if (dest / rel).read_text() != lab.read_text():
                fail(f"the copy's {rel} is not the starter")

        # Refuses a folder that is not empty.
        p2 = subprocess.run([str(kit / "tools" / "handout"), str(dest)], capture_output=True, text=True)
        if p2.returncode != 2 or "not empty" not in p2.stderr:
            fail(f"a second handout into the same folder must be refused (exit {p2.returncode}: {p2.stderr})")

        # The copy configures, with the starters.
        p = subprocess.run(["meson", "setup", str(dest / "build"), str(dest), "-Dcuda=disabled"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=110)
        if p.returncode != 0:
            print(p.stdout)
            fail("the copy does not configure")
        lines = [l for l in p.stdout.splitlines() if l.strip().startswith("exercises")]
        print("\n".join(lines))
        if not lines or "starter" not in lines[0]:
            fail("the copy's exercises option does not resolve to starter")
        print("ok: the handout has no solutions/ and configures with the starters")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
