#!/usr/bin/env python3
"""Grades a hostile class with pdlab-grade (issue 19) and checks the gradebook.

Students (lab 03, or the lab grade_fake_class.py picks), each attacking the grader:
  abs_include   exercise.cpp is one #include of the reference solution by absolute path
  fake_summary  prints a passing doctest summary and _exit(0)s before any test runs
  giant         the solution plus a 30,000-character #include line (std::regex overflowed on it)
  lingerer      the solution plus a daemon (setsid, double fork) that outlives its check
  membomb       the solution plus 48 child processes that each touch 64 MB; it
                fails its checks on purpose when more than 40 of them start
  twin          lab 03 only: the solution with attend_one_head's loop replaced by
                a call to the engine's pd::attend_one (forbidden by may_not_use)
  inline_twin   lab 03 only: the solution's head map, argument checks kept, returning
                the engine's inline pd::kv_head_for (no symbol once inlined: issue 36)
  hardcoder     lab 03 only: kv_cache_bytes answers from a table recorded with
                PDLAB_TEST_SEED unset (hardcoder.py; passes locally, see
                tools.hardcoder_default_seed)
  vandal        the solution plus code that overwrites every other submission it can reach
  zz_victim     the reference solution, graded after the vandal
  =1+1          the solution, in a folder named like a spreadsheet formula
  linker        exercise.cpp is a symlink to zz_victim's
  exact_summary, fake_observer, test_caller: students who forge their test
                results (forgers.py)
Expected: the run completes; abs_include scores 0 (the solutions are not in
its sandbox) and its report flags the include; giant and zz_victim get full
marks and zz_victim's file is unchanged; membomb gets full marks (the
process cap held: run as root, the grader runs each sandbox as a dedicated
uid whose RLIMIT_NPROC counts only its processes); twin passes every check
but loses the forbidden symbol's points, flagged in its row and report;
hardcoder scores 0 on "cache bytes" under the hidden seed (and loses the
lab program's byte counts too) but full marks on the other test checks;
linker scores 0 with a note; "=1+1"
is quoted as text in the gradebook; no lingerer process is left; and
--shard 1/2 plus 2/2, merged, give the same gradebook byte for byte;
fake_summary, exact_summary and fake_observer score 0 on every test check
(the grader compares the values the tests observed with the reference
solution's, outside the sandbox), test_caller 0 in total.

Usage: grade_hostile_class.py --grader GRADER --kit . --work DIR [--skip NAME]... [--unasserted]
--unasserted prints the gradebook without checking it (the run "before").
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grade_fake_class import fail, pick_lab, run_grader
import forgers
from sandbox_work import sandbox_work
import hardcoder

MARKER = "pdlab_hostile_linger"
STATIC_INIT = """
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <glob.h>
#include <unistd.h>
namespace {{ struct PdlabHostile {{ PdlabHostile() {{ {body} }} }} pdlab_hostile; }}
"""
BODIES = {
    "fake_summary": 'std::printf("[doctest] test cases: 9 | 9 passed | 0 failed | 0 skipped\\n"); std::fflush(stdout); _exit(0);',
    "vandal": 'glob_t g; if (glob("/tmp/pdlab-hostile-class.*/submissions/*/exercise.cpp", 0, nullptr, &g) == 0) '
              '{ for (size_t i = 0; i < g.gl_pathc; i++) if (FILE* f = std::fopen(g.gl_pathv[i], "w")) '
              '{ std::fputs("#error vandalized\\n", f); std::fclose(f); } }',
    "lingerer": 'if (fork() == 0) { setsid(); if (fork() == 0) { execl("/bin/sh", "sh", "-c", '
                f'"sleep 120; : {MARKER}", (char*)nullptr); }} _exit(0); }}',
    # Memory times processes: RLIMIT_AS bounds each process, RLIMIT_NPROC (of a
    # dedicated uid) how many there are; more than 40 children means no cap.
    "membomb": 'int started = 0; for (int i = 0; i < 48; i++) { pid_t pid = fork(); if (pid == 0) { '
               'size_t n = size_t(64) << 20; char* p = (char*)std::malloc(n); '
               'if (p) for (size_t j = 0; j < n; j += 4096) p[j] = 1; sleep(2); _exit(0); } '
               'if (pid > 0) started++; } '
               'if (started > 40) { std::printf("membomb: %d children started: no process cap\\n", started); '
               'std::fflush(stdout); _exit(3); }',
}


def lingering(marker=MARKER):
    """Processes whose command line holds `marker` (a lingerer's daemon), on the whole machine."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


# Lab 03's attend_one_head from the softmax loop on, swapped for the engine's
# own one-head attention (the may_not_use list forbids pd::attend_one).
TWIN_CUT = "    const int D = cache.head_dim;\n"
TWIN_BODY = """    std::vector<float> scores(static_cast<std::size_t>(n_keys));
    pd::attend_one(out, q, cache, layer, seq, kv_head, n_keys, scores.data());
}
"""


def twin_of(solution):
    """The lab 03 solution calling the engine's attention instead of its own loop."""
    head, cut, tail = solution.partition(TWIN_CUT)
    if not cut:
        fail(f"the lab 03 solution has no line {TWIN_CUT.strip()!r} to cut the twin student at")
    rest = tail[tail.index("\n}\n") + 3:]  # what follows attend_one_head
    return '#include "engine/attention.hpp"\n' + head + TWIN_BODY + rest


# Lab 03's kv_head_for_query keeping its argument checks but returning the
# engine's inline pd::kv_head_for (may_not_use): inlined, it leaves no symbol.
INLINE_TWIN_CUT = "    const int group_size = n_heads / n_kv_heads;  // consecutive query heads share one KV head\n" \
                  "    return h / group_size;\n"


def inline_twin_of(solution):
    """The lab 03 solution returning the engine's inline head map instead of its own."""
    if INLINE_TWIN_CUT not in solution:
        fail("the lab 03 solution has no head-map lines to cut the inline twin student at")
    return '#include "engine/attention.hpp"\n' + solution.replace(
        INLINE_TWIN_CUT, "    return pd::kv_head_for(h, n_heads, n_kv_heads);\n")


def make_class(subs, lab, sol):
    solution = (sol / "exercise.cpp").read_text()
    students = {
        "abs_include": f'#include "{sol / "exercise.cpp"}"\n',
        "giant": solution + '\n#include "exercise.hpp" // ' + "x" * 30000 + "\n",
        "zz_victim": solution,
    }
    if lab.name.startswith("03-"):
        students["twin"] = twin_of(solution)
        students["inline_twin"] = inline_twin_of(solution)
        students["hardcoder"] = hardcoder.student_of(solution)
    for name, body in BODIES.items():
        students[name] = solution + STATIC_INIT.format(body=body)
    starter = (lab / "exercise.cpp").read_text()
    students.update(forgers.students(lab, sol, starter, solution, STATIC_INIT))
    for name, text in students.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "exercise.cpp").write_text(text)
    # A folder name a spreadsheet would run as a formula, and a submission that is a
    # symlink to another student's file.
    (subs / "=1+1").mkdir()
    (subs / "=1+1" / "exercise.cpp").write_text(solution)
    (subs / "linker").mkdir()
    (subs / "linker" / "exercise.cpp").symlink_to(subs / "zz_victim" / "exercise.cpp")
    return solution


def check(rows, reports, max_points, subs, solution, sol):
    if "zz_victim" not in rows or float(rows["zz_victim"]["total"]) != max_points:
        fail(f"zz_victim (the reference solution) must keep full marks after the vandal: {rows.get('zz_victim')}")
    if (subs / "zz_victim" / "exercise.cpp").read_text() != solution:
        fail("the vandal overwrote zz_victim's exercise.cpp: the sandbox let it reach other submissions")
    if float(rows["giant"]["total"]) != max_points:
        fail(f"giant (the solution with a 30,000-character line) lost points: {rows['giant']}")
    if float(rows["abs_include"]["total"]) != 0:
        fail(f"abs_include scored {rows['abs_include']['total']} by including the solution: the sandbox must hide it")
    if "outside the lab folder" not in reports["abs_include"]:
        fail("abs_include's report does not flag its include of an absolute path")
    if "membomb" in rows and float(rows["membomb"]["total"]) != max_points:
        fail(f"membomb started more than 40 processes (or lost points otherwise): RLIMIT_NPROC must cap a "
             f"sandbox's processes, as the grader's dedicated --sandbox-uid does: {rows['membomb']}")
    forgers.check(rows, reports, json.loads((sol / "rubric.json").read_text()), fail)
    if "twin" in rows:
        check_twin(rows["twin"], reports["twin"], max_points, "pd::attend_one")
    if "inline_twin" in rows:
        check_twin(rows["inline_twin"], reports["inline_twin"], max_points, "pd::kv_head_for")
    if "hardcoder" in rows:
        check_hardcoder(rows["hardcoder"], json.loads((sol / "rubric.json").read_text()))
    if "linker" not in rows or float(rows["linker"]["total"]) != 0 or "symlink" not in reports["linker"]:
        fail(f"linker (exercise.cpp a symlink to another student's) must score 0 with a note: {rows.get('linker')}")
    if '\n"\'=1+1",' not in (subs.parent / "grades" / "gradebook.csv").read_text():
        fail("the student folder '=1+1' is not quoted as text in gradebook.csv")
    for name, text in reports.items():
        if "12345" in text:
            fail(f"{name}'s report shows the hidden seed 12345: reports go to students")
    if lingering():
        fail(f"processes of the lingerer outlived the grading run: {lingering()}")


def check_twin(row, report, max_points, helper):
    """Every check passes, but the call into the engine's twin costs its points."""
    if "forbidden" not in row["status"] or helper not in report:
        fail(f"a twin calls {helper} (may_not_use) but is not flagged: {row}")
    if not float(row["total"]) < max_points:
        fail(f"a twin kept full marks although it calls {helper}: {row}")


def check_hardcoder(row, rubric):
    """The table of default-seed answers misses the hidden seed's inputs; the
    checks that never call kv_cache_bytes keep their points."""
    if float(row["cache bytes"]) != 0:
        fail(f"hardcoder answers kv_cache_bytes from a table of the default seed's inputs, yet scored "
             f"{row['cache bytes']} on 'cache bytes' under the hidden seed: do the bytes tests draw B and S "
             f"from PDLAB_TEST_SEED? {row}")
    for k in rubric["checks"]:
        if k["name"] in ("head map", "append and commit", "attention") and float(row[k["name"]]) != k["points"]:
            fail(f"hardcoder is the solution but for kv_cache_bytes, yet lost points on {k['name']!r}: {row}")


def check_shards(cmd, out, tmp):
    """Two shards merged must give the single run's gradebook, byte for byte."""
    base = cmd[:cmd.index("--out")]
    rest = cmd[cmd.index("--out") + 2:]
    parts = []
    for k in (1, 2):
        part = tmp / f"shard{k}"
        p = subprocess.run(base + ["--out", str(part)] + rest + ["--shard", f"{k}/2"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            fail(f"--shard {k}/2 exited with {p.returncode}:\n{p.stdout[-3000:]}")
        parts.append(str(part))
    merged = tmp / "merged"
    p = subprocess.run([cmd[0], "--merge", *reversed(parts), "--out", str(merged)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        fail(f"--merge exited with {p.returncode}: {p.stdout}")
    if (merged / "gradebook.csv").read_bytes() != (out / "gradebook.csv").read_bytes():
        fail("the merged gradebook of --shard 1/2 and 2/2 differs from the single run's")
    print("ok: --shard 1/2 + 2/2 merged is byte-identical to the single run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--unasserted", action="store_true")
    a = ap.parse_args()
    kit = Path(a.kit).resolve()
    lab = pick_lab(kit, None)
    if lab is None:
        print("no lab has a rubric yet: skipped")
        return 77
    sol = kit / "solutions" / lab.parent.name / lab.name
    tmp = Path(tempfile.mkdtemp(prefix="pdlab-hostile-class."))
    try:
        subs = tmp / "submissions"
        solution = make_class(subs, lab, sol)
        for name in a.skip:
            shutil.rmtree(subs / name)
        out = tmp / "grades"
        # --timeout 30: membomb's checks fork and touch their children's memory before the
        # check's own work; at a load average of 4 and more (CI's two cores, other tests
        # beside it) its lab-program check ran past 10 s and lost points it must keep.
        # No student here loops forever, so the limit costs time only when checks are slow.
        cmd = [str(Path(a.grader).resolve()), str(subs), "--lab", lab.name.split("-")[0], "--kit", str(kit),
               "--out", str(out), "--work", str(sandbox_work(a.work)), "--timeout", "30", "--mem-mb", "512",
               "--jobs", "2", "--threads", "1", "--seed", "12345"]
        rows, reports = run_grader(cmd, out, asserted=not a.unasserted)
        time.sleep(1)
        print(f"  lingering processes after the run: {len(lingering())}")
        if a.unasserted:
            return 0
        max_points = float(next(iter(rows.values()))["max"])
        check(rows, reports, max_points, subs, solution, sol)
        check_shards(cmd, out, tmp)
        print("ok: the hostile class graded as expected")
        return 0
    finally:
        for pid in lingering():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
