#!/usr/bin/env python3
"""pdlab-grade refuses bad usage at once, with one clear message and exit 2:
an unknown lab, a missing SUBMISSIONS folder, an empty one, a missing rubric,
(run as root) a --work folder the sandbox's uid cannot reach.
Nothing is built. Usage: grade_usage.py --grader EXE --kit DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sandbox_work import closed_folder, sandbox_refusal, sandbox_work


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, p.stdout


def expect(cmd, rc, text, ran=None):
    """cmd (or `ran`, its (exit, output) when it has run already) must exit rc and print text."""
    got_rc, out = ran or run(cmd)
    print("$", " ".join(cmd[1:]), "->", got_rc, "|", out.strip().splitlines()[-1] if out.strip() else "")
    if got_rc != rc or text not in out:
        print(f"FAIL: expected exit {rc} and \"{text}\", got exit {got_rc}:\n{out}", file=sys.stderr)
        sys.exit(1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    a = ap.parse_args()
    kit = Path(a.kit).resolve()
    a.grader = str(Path(a.grader).resolve())
    g = [a.grader, "--kit", str(kit)]

    out = expect([a.grader, "--help"], 0, "HIDDEN INPUTS")
    for word in ("--lab", "--out", "--timeout", "--mem-mb", "--jobs", "--seed", "rubric.json", "gradebook.csv"):
        if word not in out:
            print(f"FAIL: --help does not mention {word}", file=sys.stderr)
            return 1
    expect(g + ["--lab", "03"], 2, "SUBMISSIONS")  # no SUBMISSIONS argument

    tmp = Path(tempfile.mkdtemp(prefix="pdlab-grade-usage."))
    try:
        (tmp / "empty").mkdir()
        (tmp / "class" / "alice").mkdir(parents=True)
        expect(g + [str(tmp / "class"), "--lab", "99"], 2, "there is no such lab")
        expect(g + [str(tmp / "class"), "--lab", "x"], 2, "the labs are")
        # Shards and merges (issue 19): a bad K/N, a shard without the shared seed, a merge
        # with nowhere to go or of a folder that is not a shard's.
        expect(g + [str(tmp / "class"), "--lab", "03", "--shard", "3/2", "--seed", "1"], 2, "1 <= K <= N")
        expect(g + [str(tmp / "class"), "--lab", "03", "--shard", "1/2"], 2, "--shard needs --seed")
        expect(g + ["--merge", str(tmp / "class")], 2, "--merge needs --out")
        expect(g + ["--merge", str(tmp / "class"), "--out", str(tmp / "m")], 2, "no shard.txt")
        expect(g + [str(tmp / "class"), "--lab", "03", "--kit", str(tmp)], 2, "not the lab kit")
        if os.geteuid() == 0:  # root runs sandboxes as --sandbox-uid, which cannot enter tmp (0700)
            work_check = g + [str(tmp / "class"), "--lab", "03", "--work", str(tmp / "work")]
            ran = run(work_check)
            if sandbox_refusal(ran[1]):
                # A chroot, or a kernel without unprivileged user namespaces: the grader refuses
                # before it looks at --work (it grades nothing without a sandbox).
                print("note: bwrap cannot make a sandbox here: the --work check is not reached")
            else:
                expect(work_check, 2, "cannot pass through", ran)
            # ... so the grader tests (grade_fake_class, grade_hostile_class) swap such a --work for
            # a folder of their own the sandbox can reach (a clone under a mode-700 folder, issue 36)
            stand_in = sandbox_work(tmp / "kit" / "build" / "grade-work")
            if closed_folder(stand_in) is not None:
                print(f"FAIL: the stand-in work folder {stand_in} is closed at {closed_folder(stand_in)}",
                      file=sys.stderr)
                return 1
            stand_in.rmdir()

        # A fake kit: a lab with a solution but no rubric, then with a bad one.
        fake = tmp / "fakekit"
        (fake / "labs" / "track1" / "07-fake").mkdir(parents=True)
        (fake / "solutions" / "track1" / "07-fake").mkdir(parents=True)
        (fake / "meson.build").write_text("project('fake', 'cpp')\n")
        (fake / "solutions" / "track1" / "07-fake" / "exercise.cpp").write_text("int x;\n")
        f = [a.grader, "--kit", str(fake), str(tmp / "class"), "--lab", "07"]
        expect(f, 2, "has no rubric")
        (fake / "solutions" / "track1" / "07-fake" / "rubric.json").write_text(
            '{"lab": "07", "checks": [{"name": "a", "kind": "test", "test_cases": "x", "points": 1}]}')
        expect(f, 2, "unknown key \"test_cases\"")
        (fake / "solutions" / "track1" / "07-fake" / "rubric.json").write_text('{"lab": "07", "checks": [')
        expect(f, 2, "not valid JSON")
        (fake / "solutions" / "track1" / "07-fake" / "rubric.json").write_text(
            '{"lab": "07", "checks": [{"name": "a", "kind": "test", "test_case": "x", "points": 1}]}')
        expect([a.grader, "--kit", str(fake), str(tmp / "empty"), "--lab", "07"], 2, "holds no student folders")
        expect([a.grader, "--kit", str(fake), str(tmp / "nowhere"), "--lab", "07"], 2, "no such folder")
        expect([a.grader, "--kit", str(fake), str(tmp / "class"), "--lab", "07", "--student", "bob"], 2,
               "--student bob")
        shutil.rmtree(fake / "solutions")
        expect(f, 2, "no solutions/ folder")
        print("ok: bad usage exits 2 with a clear message")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
