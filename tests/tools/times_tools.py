#!/usr/bin/env python3
"""tools/build-times and tools/test-times on made-up logs.

build-times (a ninja log and compile_commands.json): the slowest steps named by
their source (a link by its output), the last of a step's runs counted, the
folder totals. test-times (two meson test logs): the slowest tests first, the
seconds per suite. Both refuse bad input with exit 2.

    times_tools.py --build-times TOOLS/build-times --test-times TOOLS/test-times
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

LOG = """# ninja log v5
0\t9000\t1\tsrc/libcore.a.p/io_json.cpp.o\taa
0\t2000\t1\tsrc/libcore.a.p/io_config.cpp.o\tbb
0\t1500\t1\tlabs/track1/03/03.p/main.cpp.o\tcc
2000\t2500\t1\tsrc/libcore.a\tdd
0\t4000\t1\tsrc/libcore.a.p/io_config.cpp.o\tbb
"""


def run(tool, *args):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)


def check_build_times(tool):
    with tempfile.TemporaryDirectory() as tmp:
        build = os.path.join(tmp, "build")
        os.mkdir(build)
        open(os.path.join(build, ".ninja_log"), "w").write(LOG)
        commands = [{"directory": build, "file": "../src/io/" + f, "output": "src/libcore.a.p/io_" + f + ".o"}
                    for f in ("json.cpp", "config.cpp")]
        commands.append({"directory": build, "file": "../labs/track1/03/main.cpp",
                         "output": "labs/track1/03/03.p/main.cpp.o"})
        json.dump(commands, open(os.path.join(build, "compile_commands.json"), "w"))

        r = run(tool, "--top", "3", build)
        assert r.returncode == 0, r.stderr
        rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and not l.startswith("| slowest")
                and not l.startswith("| folder")]
        # Slowest first; io/config.cpp's second run (4 s) counts, not its first (2 s).
        assert rows[:3] == ["| src/io/json.cpp | 9.0 |", "| src/io/config.cpp | 4.0 |",
                            "| labs/track1/03/main.cpp | 1.5 |"], r.stdout
        assert "| src/io | 13 | 2 |" in rows, r.stdout
        assert "| labs/track1 | 2 | 1 |" in rows, r.stdout
        assert "| src | 0 | 1 |" in rows, r.stdout  # the archive: a link step, by its output
        assert r.stdout.startswith("4 steps, 15 s"), r.stdout

        for bad in (["--top", "0", build], [os.path.join(tmp, "nowhere")]):
            r = run(tool, *bad)
            assert r.returncode == 2 and r.stderr, (bad, r.returncode, r.stderr)
        open(os.path.join(build, ".ninja_log"), "w").write("not a log\n")
        r = run(tool, build)
        assert r.returncode == 2 and "not a ninja log" in r.stderr, r.stderr


def check_test_times(tool):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-times", required=True)
    ap.add_argument("--test-times", required=True)
    a = ap.parse_args()
    check_build_times(a.build_times)
    check_test_times(a.test_times)
    print("ok: build-times, test-times")


if __name__ == "__main__":
    main()
