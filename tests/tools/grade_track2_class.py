#!/usr/bin/env python3
"""Grades a small class of lab 08, 09, 14, 15, 16 or 17 with pdlab-grade and checks
every row (issue 33: the track 2 labs graded like lab 03, whose classes are
grade_fake_class.py and grade_hostile_class.py; issue 34: labs 15, 16 and 17
too; lab 17's last output check scales its points with goodput: honest gets
all of them, a forger none; issue 50: lab 14's whole tiled kernel).

Students:
  honest         the reference solution: full marks
  wrong          the solution with one common mistake (WRONG below): the checks
                 that mistake breaks score 0, every other check keeps its points
  fake_observer  the starter, forging its test results and observations
                 (forgers.py): 0 on every test check
  test_caller    the solution plus a call into the tests' own code (forgers.py):
                 0 in total, flagged "forbidden"
  engine_caller  (labs with FORBIDDEN below) the solution with one exercise
                 function handed to the engine's twin (lab 16: the ring to
                 MPI_Allreduce): every test passes, the rubric's points for
                 that symbol are taken off, flagged "forbidden"; lab 14:
                 the kit's naive_attention on every problem small enough
                 to pass unseen by the memory check

Usage: grade_track2_class.py --grader GRADER --kit . --work DIR --lab 08|09|14|15|16|17 [--absent WHAT]
--absent WHAT: the lab cannot build here (lab 09 without Open MPI): exit 77
(meson: skipped), never a pass; so too without the lab's solution and rubric,
and where bwrap cannot make a sandbox (a chroot), as in the other grader tests.
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import forgers
from grade_fake_class import fail, lab_and_solution, run_grader
from grade_hostile_class import STATIC_INIT
from sandbox_work import sandbox_work

# lab -> the mistake: the solution's lines, what the student wrote instead,
# and the rubric checks whose tests catch it (every other check must not).
WRONG = {
    "08": {
        "what": "budget_for_target rounds the rows up: its step can run past the target",
        "solution": "std::floor((line_ms - cost.weights_ms) / cost.per_row_ms)",
        "student": "std::ceil((line_ms - cost.weights_ms) / cost.per_row_ms)",
        "broken": {"budget for a target", "the controller in the scheduler"},
    },
    "09": {
        "what": "split_verdict exposes the whole transfer, as if no message overlapped the prefill",
        "solution": "const double exposed = done - c.prefill_ms;",
        "student": "const double exposed = transfer_ms;",
        "broken": {"when splitting pays"},
    },
    "14": {
        "what": "every row of a query block sees the keys of the block's last row (the causal mask per block)",
        "solution": "auto n = [&](int r) { return std::min(t.Bc, visible(r) - j0); };",
        "student": "auto n = [&](int r) { return std::min(t.Bc, visible(R - 1) - j0); };",
        "broken": {"causal diagonal", "hostile scores", "every head", "one tile of memory"},
    },
    "15": {
        "what": "attend maps query head h to KV head h % n_kv_heads (interleaved) instead of h / group",
        "solution": "const int kv = h / group;",
        "student": "const int kv = h % cache.n_kv_heads;",
        "broken": {"attention over the cache", "decoder layer", "whole forward", "greedy generation"},
    },
    "16": {
        "what": "shard_layer takes each rank's k rows at its q heads' offset (KV heads numbered like query heads)",
        "solution": "take_rows(full.qkv, Q + p.kv_first * hd, p.kv_heads * hd, s.qkv);",
        "student": "take_rows(full.qkv, Q + p.q_first * hd, p.kv_heads * hd, s.qkv);",
        "broken": {"the slices", "the split model"},
    },
    "17": {
        "what": "admit takes one more than the room: the Scheduler stops it (more than max_seqs would run)",
        "solution": "if (int(out.size()) == room) break;",
        "student": "if (int(out.size()) == room + 1) break;",
        # The program's checks run it too, but on the class's trace (seed 12345) the reference's
        # bf16 steps keep the queue within the room, so the extra admission never happens there.
        "broken": {"the policy's rules", "tokens as if alone", "goodput at least the baseline's"},
    },
}

# lab -> a student who calls the engine's twin of an exercise function: the
# solution's line it replaces, the call, and the rubric's symbol.
FORBIDDEN = {
    "14": {
        "solution": "                          Tiles tiles, TileScratch scratch) {",
        "student": "                          Tiles tiles, TileScratch scratch) {\n"
                   "    if (shape.S <= 1000) {\n"
                   "        std::vector<float> qh(std::size_t(shape.T) * shape.D), oh(qh.size());\n"
                   "        for (int i = 0; i < shape.T; i++) std::copy_n(q + i * shape.ld, shape.D, &qh[i * shape.D]);\n"
                   "        naive_attention(oh.data(), qh.data(), K, V, {shape.T, shape.S, 1, 1, shape.D});\n"
                   "        for (int i = 0; i < shape.T; i++) std::copy_n(&oh[i * shape.D], shape.D, out + i * shape.ld);\n"
                   "        return;\n"
                   "    }",
        "include": '#include <vector>\n#include "kernels.hpp"\n',
        "symbol": "pd::lab14::naive_attention",
    },
    "15": {
        "solution": "void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {",
        "student": "void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {\n"
                   "    return pd::rmsnorm(out, x, w, rows, dim, eps);",
        "include": '#include "engine/ops.hpp"\n',
        "symbol": "pd::rmsnorm",
    },
    # A ring that hands the sum to MPI where the tests never look (under
    # mpirun): declared weak, so the tests, which link no MPI, still link and
    # run the honest ring. The arguments stand for MPI_IN_PLACE, MPI_FLOAT,
    # MPI_SUM and MPI_COMM_WORLD: the grader judges the call by its symbol.
    "16": {
        "solution": "void ring_allreduce(Comm& comm, std::span<float> x) {",
        "student": "void ring_allreduce(Comm& comm, std::span<float> x) {\n"
                   "    if (MPI_Allreduce && std::getenv(\"OMPI_COMM_WORLD_SIZE\")) {\n"
                   "        MPI_Allreduce(nullptr, x.data(), int(x.size()), nullptr, nullptr, nullptr);\n"
                   "        return;\n"
                   "    }",
        "include": '#include <cstdlib>\n'
                   'extern "C" [[gnu::weak]] int MPI_Allreduce(const void*, void*, int, void*, void*, void*);\n',
        "symbol": "MPI_Allreduce",
    },
}


def make_class(subs, lab, sol, number):
    solution = (sol / "exercise.cpp").read_text()
    wrong = WRONG[number]
    if wrong["solution"] not in solution:
        fail(f"{sol}/exercise.cpp has no line {wrong['solution']!r} to make the wrong student from")
    starter = (lab / "exercise.cpp").read_text()
    forging = forgers.students(lab, sol, starter, solution, STATIC_INIT)
    students = {
        "honest": solution,
        "wrong": solution.replace(wrong["solution"], wrong["student"]),
        "fake_observer": forging["fake_observer"],
        "test_caller": forging["test_caller"],
    }
    if number in FORBIDDEN:
        f = FORBIDDEN[number]
        if f["solution"] not in solution:
            fail(f"{sol}/exercise.cpp has no line {f['solution']!r} to make the engine caller from")
        students["engine_caller"] = f["include"] + solution.replace(f["solution"], f["student"])
    for name, text in students.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "exercise.cpp").write_text(text)


def check(rows, reports, rubric, number):
    checks = rubric["checks"]
    max_points = sum(k["points"] for k in checks)
    expected = ["fake_observer", "honest", "test_caller", "wrong"] + (["engine_caller"] if number in FORBIDDEN else [])
    if sorted(rows) != sorted(expected):
        fail(f"gradebook rows: {sorted(rows)}")
    row = rows["honest"]
    if float(row["total"]) != max_points or row["status"] != "ok":
        fail(f"honest (the reference solution) must get {max_points:g} and ok: {row}")

    wrong = WRONG[number]
    row = rows["wrong"]
    for k in checks:
        got = float(row[k["name"]])
        if k["name"] in wrong["broken"] and k["points"] > 0 and got != 0:
            fail(f"wrong ({wrong['what']}) scored {got:g} on {k['name']!r}: that check's tests must catch it: {row}")
        if k["name"] not in wrong["broken"] and got != k["points"]:
            fail(f"wrong ({wrong['what']}) lost points on {k['name']!r}, which its mistake does not touch: {row}")
    if "failed" not in reports["wrong"]:
        fail("wrong's report does not say which checks failed")

    for k in checks:
        if k["kind"] == "test" and float(rows["fake_observer"][k["name"]]) != 0:
            fail(f"fake_observer forges its test results, yet scored {rows['fake_observer'][k['name']]} on "
                 f"{k['name']!r}: {rows['fake_observer']}")
    row = rows["test_caller"]
    if float(row["total"]) != 0 or "forbidden" not in row["status"] or "pd::test::" not in reports["test_caller"]:
        fail(f"test_caller compiles the tests' pd::test::randn into its exercise: it must score 0, flagged "
             f"'forbidden symbol' with the symbol in its report: {row}")
    if number in FORBIDDEN:
        symbol = FORBIDDEN[number]["symbol"]
        points = next((f["points"] for f in rubric.get("may_not_use", []) if f["symbol"] == symbol), None)
        if points is None:
            fail(f"the rubric's may_not_use does not list {symbol}: a student who calls it keeps every point")
        row = rows["engine_caller"]
        if float(row["total"]) != max_points - points or "forbidden" not in row["status"] \
                or symbol not in reports["engine_caller"]:
            fail(f"engine_caller calls {symbol}: its tests pass, so it must score {max_points - points:g} "
                 f"(the rubric's {points} off), flagged 'forbidden symbol' with {symbol} in its report: {row}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lab", required=True, choices=sorted(WRONG))
    ap.add_argument("--absent", help="what the lab needs and this machine lacks: skip (exit 77)")
    a = ap.parse_args()
    if a.absent:
        print(f"lab {a.lab} does not build here ({a.absent} is absent): skipped")
        return 77
    kit = Path(a.kit).resolve()
    lab, sol = lab_and_solution(kit, a.lab)
    rubric = json.loads((sol / "rubric.json").read_text())
    tmp = Path(tempfile.mkdtemp(prefix="pdlab-track2-class."))
    try:
        subs = tmp / "submissions"
        make_class(subs, lab, sol, a.lab)
        out = tmp / "grades"
        cmd = [str(Path(a.grader).resolve()), str(subs), "--lab", a.lab, "--kit", str(kit), "--out", str(out),
               "--work", str(sandbox_work(a.work)), "--timeout", "30", "--jobs", "2", "--threads", "1",
               "--seed", "12345"]
        rows, reports = run_grader(cmd, out)
        check(rows, reports, rubric, a.lab)
        print(f"ok: lab {a.lab}'s class graded as expected")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
