#!/usr/bin/env python3
"""Grades a hostile class of lab 15, 16 or 17 with pdlab-grade (issue 34: the
hostile class of issue 19, grade_hostile_class.py, where track 4 is new to the
grader) and checks the gradebook and the machine after it.

Lab 16's ranks: the grader runs no mpirun (its rubric grades the tests, whose
ranks are threads of one process, labs/track4/16-*/thread_comm.hpp), so each
attack runs from rank 1 of tp_layer, once per process:
  rank_daemon   forks a daemon (setsid, double fork) that would outlive the check
  rank_bomb     forks until fork fails, each child touching 8 MB and waiting;
                more than 40 children means no process cap: it fails on purpose
  rank_prober   tries the host's loopback (a TCP listener and an abstract unix
                socket this script opens), other students' submissions, the
                kit's solutions, the other runs' scratch folders, and a file
                in the host's /dev/shm and /tmp standing for another run's
                shared-memory segment; reaching any fails it on purpose
  rank_hang     rank 1 never returns, so the others wait in the all-reduce forever
Expected: the run completes; daemon, bomb and prober get full marks; no
process of theirs is left, the listeners accepted nothing, the victim files
are unchanged and nothing new appeared in /dev/shm or /tmp; rank_hang times
out on the two checks that run tp_layer over ranks and keeps every other point.

Lab 17's hidden trace:
  seed_finder   the solution plus a static initialiser that looks for the
                grader's seed everywhere a check can look: its environment,
                its argv, every process's command line and environment in
                /proc, every file up to 1 MB it can read (the kit's copy, the
                build, /tmp, /dev/shm, /var, /home, /root, /opt, /srv, /mnt);
                it writes what it found into its scratch folder and grades as
                the solution
Expected: full marks, and the seed nowhere outside the check's own process:
the seed reaches the process that replays the hidden trace (its argv and
environment, and the sandbox's init, bwrap, which hands them over); that is
the limit docs/instructors.md states, no file or other process may hold it.

Lab 15's forbidden engine helpers:
  runtime_lookup  the solution, but rms_norm calls the engine's pd::rmsnorm
                  through a pointer found at run time (dlsym, else the symbol
                  table of /proc/self/exe): no symbol of it in the object;
                  found nothing, it leaves `out` as it is
  kernel_twin     the solution, but rms_norm calls pd::rmsnorm's kernel under
                  its own name, pd::N_AVX2::RmsNormRow (or another SIMD
                  target's: Highway compiles one per target, each in a
                  namespace of its own), which no "pd::rmsnorm" matches
Expected: the grader strips the lab's binaries, so the lookup finds nothing
and "RMSNorm" scores 0 (the pointer never reaches the engine); kernel_twin
passes every check but loses the rubric's 10 points of "pd::N_*::RmsNormRow",
flagged "forbidden symbol".

Usage: grade_track4_hostile.py --grader GRADER --kit . --work DIR --lab 15|16|17
Exit 77 (meson: skipped) without the lab's solution and rubric, and where bwrap
cannot make a sandbox, as in the other grader tests.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from grade_fake_class import fail, lab_and_solution, run_grader
from grade_hostile_class import lingering
from sandbox_work import sandbox_work

MARKER = "pdlab_track4_linger"
# The run's hidden seed, nine digits found nowhere by chance; spelled reversed
# here, as this file is part of the kit's copy the sandbox may read.
SEED = int("519641037"[::-1])

# ---- lab 16: attacks from rank 1 of tp_layer (once per process)

TP_LAYER = "void tp_layer(ShardSublayers& sub, Comm& comm, std::span<float> x, std::span<float> partial) {\n"
RANK_PRELUDE = """#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
namespace {
void pdlab_attack() {
    static std::once_flag once;
    std::call_once(once, [] {
%s
    });
}
}  // namespace
"""
RANK_ATTACKS = {
    "rank_daemon": f"""
        pid_t p = fork();
        if (p == 0) {{
            setsid();
            if (fork() == 0) execl("/bin/sh", "sh", "-c", "sleep 120; : {MARKER}", (char*)nullptr);
            _exit(0);
        }}
        if (p > 0) waitpid(p, nullptr, 0);""",
    # Memory times processes: RLIMIT_AS bounds each, RLIMIT_NPROC (a dedicated
    # uid's) how many; the children use mmap, not malloc (a fork of a threaded process).
    "rank_bomb": """
        std::vector<pid_t> kids;
        for (int i = 0; i < 200; i++) {
            pid_t p = fork();
            if (p == 0) {
                const size_t n = size_t(8) << 20;
                void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m != MAP_FAILED) for (size_t j = 0; j < n; j += 4096) static_cast<char*>(m)[j] = 1;
                for (;;) pause();
            }
            if (p < 0) break;
            kids.push_back(p);
        }
        for (pid_t p : kids) kill(p, SIGKILL);
        for (pid_t p : kids) waitpid(p, nullptr, 0);
        if (kids.size() > 40) {
            std::printf("rank_bomb: %zu processes started from rank 1: no process cap\\n", kids.size());
            std::fflush(stdout);
            _exit(3);
        }""",
    "rank_hang": """
        for (;;) pause();""",
}
# Filled in per run: the listener's port, the abstract socket's name, the paths.
PROBER = """
        std::vector<std::string> reached;
        int t = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(@PORT@); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (t >= 0 && connect(t, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) reached.push_back("tcp 127.0.0.1:@PORT@");
        int u = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un ua{}; ua.sun_family = AF_UNIX; std::memcpy(ua.sun_path + 1, "@ABSTRACT@", sizeof "@ABSTRACT@" - 1);
        if (u >= 0 && connect(u, reinterpret_cast<sockaddr*>(&ua), socklen_t(sizeof(sa_family_t) + sizeof "@ABSTRACT@")) == 0)
            reached.push_back("abstract unix socket");
        for (const char* pattern : {"@SUBS@/*/exercise.cpp", "@SOLUTION@"}) {
            glob_t g;
            if (glob(pattern, 0, nullptr, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++) if (FILE* f = std::fopen(g.gl_pathv[i], "r")) {
                    reached.push_back(std::string("read ") + g.gl_pathv[i]); std::fclose(f); }
        }
        char cwd[4096] = "";
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
        glob_t runs;
        if (glob("@RUNS@/*", GLOB_ONLYDIR, nullptr, &runs) == 0)
            for (size_t i = 0; i < runs.gl_pathc; i++) {
                if (std::strcmp(runs.gl_pathv[i], cwd) == 0) continue;
                std::string p = std::string(runs.gl_pathv[i]) + "/@PROBE@";
                if (FILE* f = std::fopen(p.c_str(), "w")) { reached.push_back("wrote " + p); std::fclose(f); }
            }
        for (const char* victim : {"@SHM_VICTIM@", "@TMP_VICTIM@"}) {
            int fd = open(victim, O_RDWR);
            if (fd >= 0) { reached.push_back(std::string("opened ") + victim); if (write(fd, "x", 1) < 0) {} close(fd); }
        }
        for (const char* probe : {"/dev/shm/@PROBE@", "/tmp/@PROBE@"}) {
            int fd = open(probe, O_CREAT | O_WRONLY, 0644);  // private to the sandbox: must not appear outside
            if (fd >= 0) close(fd);
        }
        if (!reached.empty()) {
            for (const auto& r : reached) std::printf("rank_prober reached: %s\\n", r.c_str());
            std::fflush(stdout);
            _exit(3);
        }"""


def rank_student(solution, attack):
    """The lab 16 solution whose tp_layer runs `attack` on rank 1 of two or more, once per process."""
    if TP_LAYER not in solution:
        fail(f"the lab 16 solution has no line {TP_LAYER.strip()!r} to put a rank's attack in")
    body = solution.replace(TP_LAYER, TP_LAYER + "    if (comm.size() > 1 && comm.rank() == 1) pdlab_attack();\n")
    return RANK_PRELUDE % attack + body


class Victims:
    """What rank_prober must not reach on this machine: a TCP listener and an
    abstract unix socket on the host's loopback, a file in /dev/shm and one in
    /tmp (another run's shared memory), and the probe's name, which must
    appear nowhere outside the sandbox."""

    def __init__(self):
        tag = f"pdlab-track4-{os.getpid()}"
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.abstract = tag + "-unix"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen(8)
        self.unix.setblocking(False)
        self.files = [Path("/dev/shm") / (tag + "-victim"), Path("/tmp") / (tag + "-victim")]
        for f in self.files:
            f.write_text("another run's segment\n")
        self.probe = tag + "-probe"

    def fill(self, text, subs, sol, runs):
        for key, value in {"PORT": self.tcp.getsockname()[1], "ABSTRACT": self.abstract, "SUBS": subs,
                           "SOLUTION": sol / "exercise.cpp", "RUNS": runs, "PROBE": self.probe,
                           "SHM_VICTIM": self.files[0], "TMP_VICTIM": self.files[1]}.items():
            text = text.replace(f"@{key}@", str(value))
        return text

    def breaches(self, runs):
        found = []
        for name, s in (("the TCP listener on 127.0.0.1", self.tcp), ("the abstract unix socket", self.unix)):
            try:
                s.accept()
                found.append(f"{name} accepted a connection")
            except BlockingIOError:
                pass
        found += [f"{f} was changed" for f in self.files if f.read_text() != "another run's segment\n"]
        found += [f"{p} exists outside the sandbox" for p in
                  [Path("/dev/shm") / self.probe, Path("/tmp") / self.probe, *Path(runs).glob("*/" + self.probe)]
                  if p.exists()]
        return found

    def close(self):
        self.tcp.close()
        self.unix.close()
        for f in [*self.files, Path("/dev/shm") / self.probe, Path("/tmp") / self.probe]:
            f.unlink(missing_ok=True)


# ---- lab 17: a student who looks for the grader's seed

SEED_FINDER = r"""
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
extern char** environ;
namespace {
// The seed it looks for, kept reversed: this file, in the sandbox as the
// build's source, must not count as a place that holds it.
std::string pdlab_wanted() { std::string s = "@REVERSED@"; return std::string(s.rbegin(), s.rend()); }
std::string pdlab_slurp(const std::string& path, std::size_t most) {
    std::ifstream f(path, std::ios::binary);
    std::string s(most, '\0');
    f.read(s.data(), std::streamsize(most));
    s.resize(std::size_t(f.gcount()));
    return s;
}
struct PdlabFinder {
    std::string wanted = pdlab_wanted(), found, self = std::to_string(getpid());
    char cwd[4096] = "";
    int files = 0, processes = 0;
    void look(const std::string& where, const std::string& text) {
        if (text.find(wanted) != std::string::npos) found += where + "\n";
    }
    void walk(const std::string& dir, int depth) {
        if (depth > 12 || dir == cwd) return;  // its own scratch holds its own earlier output
        DIR* d = opendir(dir.c_str());
        if (!d) return;
        while (dirent* e = readdir(d)) {
            std::string name = e->d_name, path = (dir == "/" ? "" : dir) + "/" + name;
            struct stat st;
            if (name == "." || name == ".." || lstat(path.c_str(), &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) walk(path, depth + 1);
            else if (S_ISREG(st.st_mode) && st.st_size <= (1 << 20)) { files++; look("file " + path, pdlab_slurp(path, 1 << 20)); }
        }
        closedir(d);
    }
    PdlabFinder() {
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
        for (char** e = environ; *e; ++e) look("own environment " + std::string(*e).substr(0, std::string(*e).find('=')), *e);
        look("own argv", pdlab_slurp("/proc/self/cmdline", 1 << 16));
        if (DIR* d = opendir("/proc")) {
            while (dirent* e = readdir(d)) {
                std::string pid = e->d_name;
                if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
                processes++;
                for (const char* part : {"cmdline", "environ"})
                    look("process " + pid + " " + part, pdlab_slurp("/proc/" + pid + "/" + part, 1 << 16));
            }
            closedir(d);
        }
        for (const char* top : {"@WORK@", "/tmp", "/dev/shm", "/var", "/home", "/root", "/opt", "/srv", "/mnt"}) walk(top, 0);
        std::ofstream(std::string(cwd) + "/seed_finder.txt", std::ios::app)
            << "looked in " << files << " files and " << processes << " processes\n" << found;
    }
} pdlab_finder;
}  // namespace
"""


def seed_finder(solution, work):
    return SEED_FINDER.replace("@REVERSED@", str(SEED)[::-1]).replace("@WORK@", str(work)) + solution


def check_seed_finder(rows, max_points, runs):
    row = rows["seed_finder"]
    if float(row["total"]) != max_points:
        fail(f"seed_finder is the solution plus a search that changes nothing, yet lost points: {row}")
    record = Path(runs) / "0" / "seed_finder.txt"
    if not record.is_file():
        fail(f"seed_finder left no {record}: its search did not run, so it proves nothing")
    text = record.read_text()
    print("seed_finder's record:\n" + "".join("  " + l + "\n" for l in sorted(set(text.splitlines()))))
    # The check's own process and its sandbox's init (bwrap, pid 1, whose command
    # line carries the environment it sets): the process that replays the trace knows it.
    own = ("own environment PDLAB_TEST_SEED", "own argv", "process 1 cmdline", "process 1 environ", "looked in ")
    elsewhere = sorted({l for l in text.splitlines() if not l.startswith(own)})
    if elsewhere:
        fail(f"the hidden seed {SEED} is readable outside the check's own process: {elsewhere}")
    if "looked in 0 files" in text:
        fail("seed_finder read no file at all: its search cannot have looked")


# ---- lab 15: a forbidden helper called through a pointer found at run time

RMS_NORM = "void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {\n"
RUNTIME_LOOKUP = r"""
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
namespace {
using PdlabRmsnorm = void (*)(float*, const float*, const float*, int, int, float);
// pd::rmsnorm's mangled name: a string is no symbol of the object.
const char* const kPdlabName = "_ZN2pd7rmsnormEPfPKfS2_iif";
int pdlab_bias(dl_phdr_info* info, size_t, void* out) { *static_cast<ElfW(Addr)*>(out) = info->dlpi_addr; return 1; }
// The symbol table of the program's own file, where the linker left every name.
void* pdlab_from_symtab() {
    std::ifstream f("/proc/self/exe", std::ios::binary);
    std::string elf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (elf.size() < sizeof(ElfW(Ehdr))) return nullptr;
    auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(elf.data());
    auto* sh = reinterpret_cast<const ElfW(Shdr)*>(elf.data() + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        auto* syms = reinterpret_cast<const ElfW(Sym)*>(elf.data() + sh[i].sh_offset);
        const char* names = elf.data() + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof(ElfW(Sym)); k++)
            if (syms[k].st_value && std::strcmp(names + syms[k].st_name, kPdlabName) == 0) {
                ElfW(Addr) bias = 0;
                dl_iterate_phdr(pdlab_bias, &bias);
                return reinterpret_cast<void*>(bias + syms[k].st_value);
            }
    }
    return nullptr;
}
PdlabRmsnorm pdlab_engine_rmsnorm() {
    void* p = dlsym(RTLD_DEFAULT, kPdlabName);
    return reinterpret_cast<PdlabRmsnorm>(p ? p : pdlab_from_symtab());
}
}  // namespace
"""


def runtime_lookup(solution):
    if RMS_NORM not in solution:
        fail(f"the lab 15 solution has no line {RMS_NORM.strip()!r} to make runtime_lookup from")
    call = ("    static const PdlabRmsnorm engine = pdlab_engine_rmsnorm();\n"
            "    if (engine) engine(out, x, w, rows, dim, eps);\n"
            "    return;\n")
    return RUNTIME_LOOKUP + solution.replace(RMS_NORM, RMS_NORM + call)


# pd::rmsnorm's kernel under its own name, in the namespace Highway gives each
# SIMD target; weak, so the one this build lacks is a null pointer, not a link error.
KERNEL_TWIN = """
namespace pd::N_AVX2 { [[gnu::weak]] void RmsNormRow(float* o, const float* x, const float* w, int n, float eps); }
namespace pd::N_SCALAR { [[gnu::weak]] void RmsNormRow(float* o, const float* x, const float* w, int n, float eps); }
namespace pd::N_EMU128 { [[gnu::weak]] void RmsNormRow(float* o, const float* x, const float* w, int n, float eps); }
"""
KERNEL_CALL = """    for (auto* kernel : {&pd::N_AVX2::RmsNormRow, &pd::N_SCALAR::RmsNormRow, &pd::N_EMU128::RmsNormRow})
        if (kernel) {
            for (int r = 0; r < rows; r++) kernel(out + std::size_t(r) * dim, x + std::size_t(r) * dim, w, dim, eps);
            return;
        }
"""


def kernel_twin(solution):
    return KERNEL_TWIN + solution.replace(RMS_NORM, RMS_NORM + KERNEL_CALL)


def check_lab15(rows, reports, rubric):
    row = rows["runtime_lookup"]
    if float(row["RMSNorm"]) != 0:
        fail(f"runtime_lookup calls pd::rmsnorm through a pointer it found at run time and kept the RMSNorm "
             f"points: the grader's binaries still hold a symbol table (strip them) or export the engine: {row}")
    row = rows["kernel_twin"]
    max_points = sum(k["points"] for k in rubric["checks"])
    if float(row["total"]) != max_points - 10 or "forbidden" not in row["status"] \
            or "RmsNormRow" not in reports["kernel_twin"]:
        fail(f"kernel_twin calls pd::rmsnorm's kernel by its own name (pd::N_*::RmsNormRow): its tests pass, so "
             f"it must score {max_points - 10:g} (the rubric's 10 off), flagged 'forbidden symbol': {row}")


# ---- the run

def make_class(subs, lab, sol, number, work, victims):
    solution = (sol / "exercise.cpp").read_text()
    if number == "16":
        attacks = dict(RANK_ATTACKS, rank_prober=victims.fill(PROBER, subs, sol, work / "runs"))
        students = {name: rank_student(solution, attack) for name, attack in attacks.items()}
    elif number == "17":
        students = {"seed_finder": seed_finder(solution, work)}
    else:
        students = {"runtime_lookup": runtime_lookup(solution), "kernel_twin": kernel_twin(solution)}
    for name, text in students.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "exercise.cpp").write_text(text)


def check_lab16(rows, reports, rubric, victims, runs):
    """Every way the sandbox failed, at once (each attack tells of another hole)."""
    max_points = sum(k["points"] for k in rubric["checks"])
    problems = []
    for name in ("rank_daemon", "rank_bomb", "rank_prober"):
        if float(rows[name]["total"]) != max_points:
            said = [l for l in reports[name].splitlines() if "rank_" in l and ("reached" in l or "cap" in l)]
            problems.append(f"{name} attacks from rank 1 and must keep full marks (the sandbox held): "
                            f"{rows[name]} {sorted(set(said))}")
    hanging = {"where the sums go", "the split model"}
    row = rows["rank_hang"]
    for k in rubric["checks"]:
        got = float(row[k["name"]])
        if k["name"] in hanging and (got != 0 or "timeout" not in row["status"]):
            problems.append(f"rank_hang never returns from tp_layer on rank 1, yet {k['name']!r} did not time "
                            f"out: {row}")
        if k["name"] not in hanging and got != k["points"]:
            problems.append(f"rank_hang lost points on {k['name']!r}, which runs no ranks: {row}")
    breaches = victims.breaches(runs)
    if breaches:
        problems.append(f"rank_prober reached outside its sandbox: {breaches}")
    if lingering(MARKER):
        problems.append(f"rank_daemon's daemon outlived the grading run: {lingering(MARKER)}")
    if problems:
        fail("\n  ".join(problems))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grader", required=True)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lab", required=True, choices=["15", "16", "17"])
    a = ap.parse_args()
    kit = Path(a.kit).resolve()
    lab, sol = lab_and_solution(kit, a.lab)
    rubric = json.loads((sol / "rubric.json").read_text())
    work = sandbox_work(a.work)
    tmp = Path(tempfile.mkdtemp(prefix="pdlab-track4-hostile."))
    victims = Victims()
    try:
        subs = tmp / "submissions"
        make_class(subs, lab, sol, a.lab, work, victims)
        out = tmp / "grades"
        # --timeout 20: rank_hang's two checks each run to it; every other check
        # takes a few seconds. --mem-mb 1024: lab 17's program loads its model
        # at two precisions and oneDNN crashes (SIGSEGV) when it cannot map
        # its code at 512.
        cmd = [str(Path(a.grader).resolve()), str(subs), "--lab", a.lab, "--kit", str(kit), "--out", str(out),
               "--work", str(work), "--timeout", "20", "--mem-mb", "1024", "--jobs", "2", "--threads", "1",
               "--seed", str(SEED)]
        rows, reports = run_grader(cmd, out)
        time.sleep(1)  # a daemon that escaped would be running by now
        if a.lab == "16":
            check_lab16(rows, reports, rubric, victims, work / "runs")
        elif a.lab == "17":
            check_seed_finder(rows, sum(k["points"] for k in rubric["checks"]), work / "runs")
        else:
            check_lab15(rows, reports, rubric)
        print(f"ok: lab {a.lab}'s hostile class graded as expected")
        return 0
    finally:
        for pid in lingering(MARKER):
            os.kill(pid, signal.SIGKILL)
        victims.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
