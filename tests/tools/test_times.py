#!/usr/bin/env python3
"""tools/test-times on a made-up meson test log: the slowest tests first, the
seconds per suite over two logs, and bad input refused with exit 2.

    test_times.py --tool TOOLS/test-times
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(tool, *args):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    tool = ap.parse_args().tool
    with tempfile.TemporaryDirectory() as tmp:
        logs = []
        for i, tests in enumerate([[("pdlab:engine / engine.model", 30.0, "OK"), ("pdlab:tools / tools.grade", 90.0, "OK")],
                                   [("pdlab:engine / engine.matmul", 12.5, "FAIL")]]):
            logs.append(os.path.join(tmp, f"testlog{i}.json"))
            with open(logs[-1], "w") as f:
                for name, duration, result in tests:
                    f.write(json.dumps({"name": name, "duration": duration, "result": result}) + "\n")
        r = run(tool, "--top", "2", *logs)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("3 tests, 132 s"), r.stdout
        rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and "---" not in l]
        assert rows[1:3] == ["| pdlab:tools / tools.grade | 90.0 | OK |",
                             "| pdlab:engine / engine.model | 30.0 | OK |"], r.stdout
        assert "| engine | 42 | 2 |" in rows and "| tools | 90 | 1 |" in rows, r.stdout

        bad = os.path.join(tmp, "bad.json")
        for text in ("not json\n", json.dumps({"name": "x"}) + "\n"):
            open(bad, "w").write(text)
            r = run(tool, bad)
            assert r.returncode == 2 and "not a meson test log" in r.stderr, r.stderr
        for args in (["--top", "0", logs[0]], [os.path.join(tmp, "nowhere.json")]):
            r = run(tool, *args)
            assert r.returncode == 2 and r.stderr, (args, r.stderr)
    print("ok: test-times")


if __name__ == "__main__":
    main()
