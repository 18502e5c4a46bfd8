#!/usr/bin/python3
"""The engines' environment settings at pdlab's edge (src/engine/engine_settings.hpp).

    /usr/bin/python3 tests/python/test_engine_settings.py --pdlab build/src/pdlab/pdlab

A value PDLAB_CUDA_KV, PDLAB_CUDA_FLASH, PDLAB_CUDA_GRAPHS or PDLAB_HUGEPAGES
does not know stops `pdlab generate` with exit 2 and one line naming the
variable and its value, on the CPU too (read before the model loads); the
documented values run. Which field each value sets is engine.settings.*.
"""

import argparse
import os
import subprocess
import sys

BAD = [("PDLAB_CUDA_KV", "fp8"), ("PDLAB_CUDA_FLASH", "maybe"), ("PDLAB_CUDA_GRAPHS", "2"),
       ("PDLAB_HUGEPAGES", "true")]
GOOD = {"PDLAB_CUDA_KV": "bf16", "PDLAB_CUDA_FLASH": "0", "PDLAB_CUDA_GRAPHS": "off", "PDLAB_HUGEPAGES": "0"}


def generate(pdlab, extra_env):
    env = {k: v for k, v in os.environ.items() if k not in GOOD}
    env.update(extra_env)
    return subprocess.run([pdlab, "generate", "-m", "tiny", "-p", "hi", "-n", "2"], env=env,
                          capture_output=True, text=True, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    args = ap.parse_args()
    failures = []
    for name, value in BAD:
        r = generate(args.pdlab, {name: value})
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or f"{name}={value}" not in lines[0]:
            failures.append(f"{name}={value}: exit {r.returncode}, stderr {r.stderr!r}")
    r = generate(args.pdlab, GOOD)
    if r.returncode != 0:
        failures.append(f"documented values: exit {r.returncode}, stderr {r.stderr!r}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(BAD) + 1 - len(failures)} of {len(BAD) + 1} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
