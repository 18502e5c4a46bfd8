#!/usr/bin/python3
"""Lab 09's program under mpirun on bad input and with a hung rank: every bad
input case must exit 2 with one line from rank 0 naming the problem (the
other ranks stay quiet), and a worker that stops answering must be named by
the router, the run ending non-zero within a bounded time.

    /usr/bin/python3 tests/python/test_disagg_cli.py --program build/labs/track2/09-disaggregation/09-disaggregation

  case              ranks  what                                  expected
  prefill_0         3      --prefill 0                           exit 2, "prefill"
  too_few_ranks     2      --prefill 1 --decode 1 on 2 ranks     exit 2, "ranks"
  too_many_workers  3      --prefill 2 --decode 2 on 3 ranks     exit 2, "ranks"
  malformed_trace   3      --trace FILE, a line that is not JSON exit 2, "line 1"
  stall_rank_0      3      --stall-rank 0                        exit 2, "stall-rank"
  hung_decode       3      decode worker (rank 2) stops at once  exit != 0 in < 60 s, "decode worker 0 (rank 2)"

mpirun runs with --oversubscribe, and as root where CI is root. Its own notices
(framed by rules of dashes, e.g. "mpirun detected that one or more processes
exited with non-zero status") are left out of stderr before it is judged:
Open MPI 4 had -q to silence them, Open MPI 5 (Debian 13) refuses -q.
Prints PASS/FAIL per case; exit 0 only if none failed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

SMALL = ["--model", "synthetic:llama,dim=128,ffn=256,layers=4,heads=4,kv_heads=2,vocab=512,ctx=256",
         "--num-requests", "6", "--rate", "50", "--long-len", "100", "--output-len", "fixed:6",
         "--threads", "1", "--quiet", "--no-plot"]
CRASH = ("terminate called", "Segmentation", "core dumped", "Assertion")
RULE = "-" * 74  # Open MPI's frame around a notice of its own


def run(program, ranks, args, timeout):
    # One machine: shared memory, no TCP (Open MPI 5 otherwise warns on stderr
    # about interfaces it cannot pair, e.g. in a chroot).
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="^tcp")
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", program] + args
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, without_mpirun_notices(p.stderr), time.monotonic() - start


def without_mpirun_notices(err):
    """err without the blocks Open MPI frames between two rules of dashes."""
    kept, inside = [], False
    for line in err.splitlines(keepends=True):
        if RULE in line:
            inside = not inside
        elif not inside:
            kept.append(line)
    return "".join(kept)


def judge(name, rc, err, took, keyword, code, max_lines):
    """Prints PASS/FAIL for one case: exit `code` (None: any failure), `keyword`
    in stderr, at most `max_lines` lines of it (None: any), no crash, within
    60 s. True when it passed."""
    lines = [l for l in err.splitlines() if l.strip()]
    problems = []
    if code is not None and rc != code:
        problems.append(f"exit {rc}, expected {code}")
    if code is None and rc == 0:
        problems.append("exit 0, expected a failure")
    if keyword.lower() not in err.lower():
        problems.append(f"no '{keyword}' in stderr")
    if max_lines is not None and len(lines) > max_lines:
        problems.append(f"{len(lines)} lines on stderr (one rank should speak)")
    if any(c in err for c in CRASH):
        problems.append("a crash")
    if took > 60:
        problems.append(f"took {took:.0f} s")
    first = lines[0] if lines else "(no stderr)"
    print(f"{'FAIL' if problems else 'PASS'} {name}: {'; '.join(problems) or first}")
    return not problems


def program_or_skip():
    """The --program argument; exits 77 (meson's skip) where mpirun is not installed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", required=True)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun (apt-get install openmpi-bin)")
        sys.exit(77)
    return a.program


def main():
    program = program_or_skip()
    tmp = tempfile.mkdtemp()
    bad_trace = os.path.join(tmp, "bad.jsonl")
    with open(bad_trace, "w") as f:
        f.write("{not json\n")
    out = ["--out", tmp]
    cases = [
        ("prefill_0", 3, ["--prefill", "0"], "prefill", 2),
        ("too_few_ranks", 2, ["--prefill", "1", "--decode", "1"], "ranks", 2),
        ("too_many_workers", 3, ["--prefill", "2", "--decode", "2"], "ranks", 2),
        ("malformed_trace", 3, ["--trace", bad_trace], "line 1", 2),
        ("stall_rank_0", 3, ["--stall-rank", "0"], "stall-rank", 2),
        ("hung_decode", 3, ["--stall-rank", "2", "--stall-after", "0", "--rank-timeout", "3"],
         "decode worker 0 (rank 2)", None),
    ]
    failed = 0
    for name, ranks, args, keyword, code in cases:
        rc, err, took = run(program, ranks, SMALL + out + args, timeout=120)
        failed += not judge(name, rc, err, took, keyword, code, max_lines=2 if code is not None else None)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(cases) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
