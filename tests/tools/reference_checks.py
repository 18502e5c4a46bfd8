#!/usr/bin/env python3
"""The two guards of the handouts' reference numbers work.

    reference_checks.py --kit KIT

1. handout_claims.py: a made-up handout whose block backs its sentences
   passes; with one number of the block edited, the check fails naming the
   sentence that no longer follows; a block whose run had other work beside it,
   or that lacks its machine line, fails too.
2. tools/reference-runs refuses to measure beside a busy process: with a
   spinning child running, --quiet-check exits 3 naming that process.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import handout_claims  # beside this file

MACHINE = ("(reference machine: AMD EPYC (family 26, model 2), kernels AVX-512, 2 cores, DRAM read 47 GB/s on "
           "1 thread, 69 GB/s on 2 threads, 2026-12-07, commit abc1234; load average 0.02 before, other "
           "processes {others} cores during the 12 s run)")
HANDOUT = """# Lab 99

<!-- reference-run: track9-99 ./kit run 99 --threads 1 -->
```
one rank: decode step  {one} ms
two ranks: decode step  7.57 ms
```
{machine}

On the reference machine two ranks made a decode step
**2.29x** faster than one.
"""
CLAIMS = """
[values]
one = { block = "track9-99", pattern = 'one rank: decode step +([\\d.]+) ms' }
two = { block = "track9-99", pattern = 'two ranks: decode step +([\\d.]+) ms' }
[derived]
speedup = "one / two"
[[claim]]
text = "two ranks made a decode step {speedup:.2f}x faster than one"
holds = "speedup > 1"
"""


def claims_check(tmp, one, others="0.01"):
    handout = os.path.join(tmp, "README.md")
    with open(handout, "w") as f:
        f.write(HANDOUT.format(one=one, machine=MACHINE.format(others=others)))
    claims = os.path.join(tmp, "claims.toml")
    with open(claims, "w") as f:
        f.write(CLAIMS)
    return handout_claims.check(handout, [claims])


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kit", required=True)
    kit = ap.parse_args().kit
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        count, problems = claims_check(tmp, "17.35")
        results.append(expect(count == 1 and not problems, f"the block backs its sentence: {problems}"))
        _, problems = claims_check(tmp, "19.00")  # 2.51x: the sentence's 2.29x is now false
        results.append(expect(len(problems) == 1 and "2.29x" not in problems[0]
                              and "two ranks made a decode step 2.51x faster" in problems[0],
                              f"an edited number names the sentence: {problems}"))
        _, problems = claims_check(tmp, "7.00")  # one rank faster: the condition fails too
        results.append(expect(any("speedup > 1 is false" in p for p in problems),
                              f"a reversed conclusion fails its condition: {problems}"))
        _, problems = claims_check(tmp, "17.35", others="0.40")
        results.append(expect(any("other processes used 0.40 cores" in p for p in problems),
                              f"a block measured beside other work fails: {problems}"))
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<20: pass"])
    try:
        done = subprocess.run([sys.executable, os.path.join(kit, "tools", "reference-runs"), "--quiet-check",
                               "--sample", "1", "--max-load", "1000"], capture_output=True, text=True, timeout=60)
    finally:
        spinner.kill()
        spinner.wait()
    results.append(expect(done.returncode == 3 and f"pid {spinner.pid}" in done.stderr,
                          f"reference-runs refuses beside a spinning process: exit {done.returncode}, "
                          f"{done.stderr.strip()}"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
