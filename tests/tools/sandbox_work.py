"""The --work folder the grader tests give pdlab-grade (issue 36).

Run as root, the grader's sandbox runs as another uid (--sandbox-uid), which
must pass through every folder above --work. The tests keep their work folder
(and its engine build, minutes to redo) in the build dir; a clone under a
mode-700 folder (what `mktemp -d` makes, many home folders) shuts the sandbox
out of it, and pdlab-grade refuses such a --work. There the tests use a
folder of their own under /var/tmp instead, kept for the next run like the
build dir's, named after the build dir so two clones never share one."""

import hashlib
import os
import stat
import sys
from pathlib import Path


def closed_folder(path):
    """The first folder at or above `path` that other users cannot pass through (no x for
    others), or None."""
    for p in [path, *path.parents]:
        if p.exists() and not os.stat(p).st_mode & 0o001:
            return p
    return None


def sandbox_work(work):
    """`work` (resolved) when the sandbox can reach it or runs as this user (not root); else a
    0711 folder under /var/tmp standing in for it."""
    work = Path(work).resolve()
    closed = closed_folder(work.parent)
    if os.geteuid() != 0 or closed is None:
        return work
    key = hashlib.sha256(str(work).encode()).hexdigest()[:12]
    home = Path("/var/tmp") / f"pdlab-grade-work-{key}"
    home.mkdir(mode=0o711, exist_ok=True)
    st = os.lstat(home)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        sys.exit(f"{home} is not a folder of this user's (someone else made it): remove it and run again")
    os.chmod(home, 0o711)  # mkdir's mode is masked by the umask
    print(f"note: {closed} is closed to the sandbox's uid: using {home} as the work folder")
    return home


def sandbox_refusal(grader_output):
    """pdlab-grade's line saying bwrap cannot make a sandbox on this machine (a chroot, or a
    container or kernel without unprivileged user namespaces), or None."""
    return next((line for line in grader_output.splitlines() if "bwrap cannot make a sandbox here" in line),
                None)


def skip_without_sandbox(grader_output):
    """Exit 77 (meson: skipped) when pdlab-grade refused for want of a sandbox. The grader did
    what it must there (it grades student code only in a sandbox); these tests have nothing to
    grade with."""
    line = sandbox_refusal(grader_output)
    if line:
        print(f"SKIP: the grader cannot sandbox on this machine, so nothing is graded here:\n  {line}")
        sys.exit(77)
