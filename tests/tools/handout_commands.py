#!/usr/bin/env python3
"""Every `./kit` command a handout shows in its code blocks must work.

    handout_commands.py --kit KIT --build BUILD HANDOUT.md

Reads the fenced (```) and indented (4 spaces) code blocks of one handout,
takes each line that starts with `./kit` (a trailing backslash joins the
next line; `#` starts a comment), and checks it against the built kit
without going through ./kit itself (which would rebuild):

  ./kit run LAB ARGS    the lab program with ARGS. Commands listed in FULL
                        run to the end and must exit 0 within their budget;
                        the others run with PDLAB_ARGS_ONLY=1, which stops the
                        program once ARGS have parsed (a lab run takes minutes:
                        too long for CI), and must exit 0. Labs 09 and 16 go
                        through their mpirun.sh, as ./kit does: every rank parses
                        ARGS; skipped where Open MPI is absent (not built).
  ./kit pdlab ARGS      pdlab with ARGS, to the end, within BUDGET_S; the
                        long-running subcommands (serve, bench of a 125M model)
                        only with --help, which still rejects an unknown one.
  ./kit test [SUITE]    each SUITE must be one `meson test --list` knows.
  ./kit compare ...     needs a GPU: skipped where nvidia-smi finds none.
  ./kit serve ...       a server that runs until stopped: `pdlab serve --help`.
  ./kit serve-sweep ..  minutes of load: serve_sweep.py --help.
  ./kit build, setup, help, handout, bench, grade: the instructor's and the
                        whole kit's commands, run by their own tests; listed.
  ./kit container run ARGS   checked as ./kit ARGS (here, not in a container);
                        container build and shell: listed (kit_container.py).

A line with "..." is a template, not a command: listed, not run.

Then the handout's reference blocks and the sentences resting on them
(handout_claims.py): each block names its quiet machine, and each claim of the
lab's claims.toml (and of its answer key's, in solutions/) holds. Exit 0 when
every checked command passed and every claim held, 1 when one did not, 77 when the handout has
nothing this machine can check (only GPU or MPI commands).
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import handout_claims  # beside this file

BUDGET_S = 60  # one full run; the whole test stays within meson's timeout

# Commands run to the end: short on 2 cores (seconds each), and together the
# first run of most labs. The rest are checked with PDLAB_ARGS_ONLY=1.
FULL = {
    "./kit run 01 --prompt \"Once upon a time, a little fox\" --steps 20",
    "./kit run 01 --model synthetic:gpt2,dim=256,layers=2 --prompt \"Hi\"",
    "./kit run 02 --threads 1",
    "./kit run 03 --help",
    "./kit run 14 --help",
    "./kit pdlab generate --prompt \"Once upon a time\" -n 40",
    "./kit pdlab trace --model synthetic:mha-h8-d64 --prompt-ids 1,2,3,4 -n 3",
    "./kit pdlab info --model synthetic:gpt2-124m",
    "./kit pdlab isa",
}
# Subcommands of pdlab that run until stopped or for minutes.
PDLAB_HELP_ONLY = {"serve", "bench", "loadgen"}
LISTED = {"build", "setup", "help", "handout", "bench", "grade", "container"}


def commands(text):
    """The `./kit` lines of the handout's code blocks, continuations joined."""
    lines, in_fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith("    "):
            lines.append(line.strip())
    out, i = [], 0
    while i < len(lines):
        cmd = lines[i]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1].rstrip() + " " + lines[i]
        i += 1
        if cmd.startswith("./kit "):
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()  # a comment after the command
            if cmd not in out:
                out.append(cmd)
    return out


def lab_program(build, lab):
    for track in sorted(os.listdir(os.path.join(build, "labs"))):
        folder = os.path.join(build, "labs", track)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.startswith(lab):
                return os.path.join(folder, name, name)
    return None


def mpi_launcher(kit, lab):
    """The lab's mpirun.sh (labs 09 and 16 run as MPI ranks), or None."""
    for track in sorted(os.listdir(os.path.join(kit, "labs"))):
        folder = os.path.join(kit, "labs", track)
        if os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                script = os.path.join(folder, name, "mpirun.sh")
                if name.startswith(lab) and os.path.exists(script):
                    return script
    return None


def has_gpu():
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def run(argv, env=None, cwd=None):
    """(ok, what happened) for one program run within BUDGET_S."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=BUDGET_S, cwd=cwd,
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired:
        return False, f"still running after {BUDGET_S} s"
    took = time.monotonic() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return False, f"exit {p.returncode} after {took:.1f} s: " + " | ".join(tail)
    return True, f"exit 0 in {took:.1f} s"


def check(cmd, kit, build, suites, gpu, scratch):
    """('ok' | 'FAIL' | 'skip' | 'listed', how it was checked)."""
    if "..." in cmd:
        return "listed", "a template (\"...\"), not a command"
    words = shlex.split(cmd)[1:]
    verb, args = words[0], words[1:]
    if verb == "run":
        prog = lab_program(build, args[0]) if args else None
        launcher = mpi_launcher(kit, args[0]) if args else None
        if launcher and not shutil.which("mpirun"):
            return "skip", "needs Open MPI (mpirun not found; the lab's program is not built without it)"
        if not prog or not os.path.exists(prog):
            return "FAIL", f"no lab program for \"{args[0] if args else ''}\" in {build}/labs"
        full = cmd in FULL
        if launcher:  # the ranks counted and started as ./kit run does
            argv = [launcher, prog] + args[1:]
        else:
            argv = [prog] + args[1:]
        ok, how = run(argv, cwd=scratch, env=None if full else {"PDLAB_ARGS_ONLY": "1"})
        return ("ok" if ok else "FAIL"), ("full run, " if full else "arguments only, ") + how
    if verb == "pdlab":
        pdlab = os.path.join(build, "src", "pdlab", "pdlab")
        if args and args[0] in PDLAB_HELP_ONLY and cmd not in FULL:
            ok, how = run([pdlab, args[0], "--help"], cwd=scratch)
            return ("ok" if ok else "FAIL"), f"`pdlab {args[0]} --help` only (runs for minutes or until stopped), " + how
        ok, how = run([pdlab] + args, cwd=scratch)
        return ("ok" if ok else "FAIL"), "full run, " + how
    if verb == "test":
        unknown = [s for s in args if s not in suites]
        if unknown:
            return "FAIL", "no test suite named " + ", ".join(unknown)
        return "ok", "its suites exist (" + (", ".join(args) or "all") + "); not run here"
    if verb == "compare":
        if not gpu:
            return "skip", "needs a GPU (nvidia-smi finds none)"
        prog = lab_program(build, args[0]) if args else None
        ok, how = run([prog] + args[1:] + ["--device", "cuda"], cwd=scratch, env={"PDLAB_ARGS_ONLY": "1"})
        return ("ok" if ok else "FAIL"), "arguments only, " + how
    if verb == "serve":
        ok, how = run([os.path.join(build, "src", "pdlab", "pdlab"), "serve", "--help"], cwd=scratch)
        return ("ok" if ok else "FAIL"), "`pdlab serve --help` only (a server runs until stopped), " + how
    if verb == "serve-sweep":
        script = os.path.join(kit, "labs", "track1", "04-ttft-and-tpot", "serve_sweep.py")
        ok, how = run(["/usr/bin/python3", script, "--help"], cwd=scratch)
        return ("ok" if ok else "FAIL"), "serve_sweep.py --help only (minutes of load), " + how
    if verb == "container" and args[:1] == ["run"] and len(args) > 1:
        return check(shlex.join(["./kit"] + args[1:]), kit, build, suites, gpu, scratch)
    if verb in LISTED:
        return "listed", f"./kit {verb}: checked by the kit's own tests and CI, not here"
    return "FAIL", f"./kit has no command \"{verb}\""


def claims_of(kit, handout):
    """(claims files, answer key) for a lab handout: its claims.toml, and the answer key's
    claims.toml in solutions/ (kept there so that a student copy carries no answers)."""
    lab = os.path.dirname(os.path.abspath(handout))
    rel = os.path.relpath(lab, os.path.join(kit, "labs"))
    if rel.startswith(".."):
        return [], None
    solution = os.path.join(kit, "solutions", rel)
    files = [f for f in (os.path.join(lab, "claims.toml"), os.path.join(solution, "claims.toml")) if os.path.exists(f)]
    answers = os.path.join(solution, "answers.md")
    return files, answers if os.path.exists(answers) else None


def check_claims(kit, handout):
    """True when every reference block is quiet and named, and every claim on one holds."""
    files, answers = claims_of(kit, handout)
    count, problems = handout_claims.check(handout, files, answers)
    for p in problems:
        print(f"CLAIM FAILS: {p}")
    print(f"{handout}: {count} claims on its reference blocks, {len(problems)} problems")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("handout")
    a = ap.parse_args()
    a.kit, a.build = os.path.abspath(a.kit), os.path.abspath(a.build)  # the programs run in a scratch folder
    claims_ok = check_claims(a.kit, a.handout)
    cmds = commands(open(a.handout, encoding="utf-8").read())
    if not cmds:
        print(f"{a.handout}: no ./kit commands in its code blocks")
        return 0 if claims_ok else 1
    listing = subprocess.run(["meson", "test", "-C", a.build, "--list", "--no-rebuild"],
                             capture_output=True, text=True).stdout
    suites = set()
    for line in listing.splitlines():  # "suite1+suite2 / name" or "project:suite / name"
        for s in line.split(" / ")[0].split("+"):
            suites.add(s.split(":")[-1].strip())
    scratch = os.path.join(a.build, "handout-commands")
    os.makedirs(scratch, exist_ok=True)  # the labs write their results and plots here
    gpu = has_gpu()
    counts = {"ok": 0, "FAIL": 0, "skip": 0, "listed": 0}
    for cmd in cmds:
        verdict, how = check(cmd, a.kit, a.build, suites, gpu, scratch)
        counts[verdict] += 1
        print(f"{verdict:6} {cmd}\n       {how}", flush=True)
    print(f"{a.handout}: {counts['ok']} ok, {counts['FAIL']} failed, {counts['skip']} skipped, "
          f"{counts['listed']} listed")
    if counts["FAIL"] or not claims_ok:
        return 1
    return 77 if counts["ok"] == 0 and counts["skip"] else 0


if __name__ == "__main__":
    sys.exit(main())
