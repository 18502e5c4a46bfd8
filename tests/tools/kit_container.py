#!/usr/bin/env python3
"""./kit container (tools/container/kit-container) against a fake podman and docker.

The fake engine fails the way Podman 4.3 does on a VM with hybrid cgroups (issue
53): crun's setrlimit RLIMIT_NOFILE error until --ulimit is given, then crun's
"cgroups in hybrid mode not supported" until --runtime runc. Checked: each
fallback is found by the probe, named once, and passed to the real command;
the working copy is mounted at /kit (and a caller's folder outside it at its
own path); only ./kit grade gets the sandbox's options; --gpu builds and runs
the GPU variant with the GPUs passed through; a missing base image
with no registry is exit 2 naming the import; any other failure is exit 2 with
the engine's own error. No container runs: seconds.

    kit_container.py --kit KIT
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SETRLIMIT = "Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied"
RUNC_NOFILE = ("Error: runc: runc create failed: unable to start container process: error during container init: "
               "error setting rlimits for ready process: error setting rlimit type 7: operation not permitted")
HYBRID = "Error: OCI runtime error: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"

# The fake engine: logs its argv (one JSON line per call) to $FAKE_LOG; the images
# in $FAKE_IMAGES exist; $FAKE_HOST says how `run` fails: vm (as above), vm-runc
# (where runc is the default: its own RLIMIT_NOFILE error only), broken (always,
# with another error) or ok. The errors are those Podman 4.3 printed on Debian 12.
FAKE = f"""#!{sys.executable}
import json, os, sys
argv = sys.argv[1:]
open(os.environ["FAKE_LOG"], "a").write(json.dumps(argv) + "\\n")
host, images = os.environ["FAKE_HOST"], os.environ["FAKE_IMAGES"].split()
words = [a for a in argv if not a.startswith("-")]
if words[:2] == ["image", "inspect"]:
    sys.exit(0 if words[2] in images else 1)
if words[:1] == ["pull"]:
    sys.exit(print("Error: initializing source docker://" + words[1] + ": dial tcp: lookup registry-1.docker.io: no such host", file=sys.stderr) or 125)
if "run" in argv and host == "vm-runc" and "--ulimit" not in argv:
    sys.exit(print({RUNC_NOFILE!r}, file=sys.stderr) or 126)
if "run" in argv and host == "vm" and "--ulimit" not in argv:
    sys.exit(print({SETRLIMIT!r}, file=sys.stderr) or 126)
if "run" in argv and host == "vm" and "runc" not in argv:
    sys.exit(print({HYBRID!r}, file=sys.stderr) or 126)
if "run" in argv and host == "broken":
    sys.exit(print("Error: netavark: iptables: No chain/target/match by that name", file=sys.stderr) or 126)
"""

BASE = "docker.io/library/debian:trixie"
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
RUNC = ["--runtime", "runc", "--cgroup-manager=cgroupfs"]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Host:
    """A PATH holding the fake engines, runc and only the tools the scripts use
    (no real podman, docker or runc), and a log of the engines' calls."""

    def __init__(self, tmp, with_runc=True):
        self.bin = os.path.join(tmp, "bin" + ("-runc" if with_runc else ""))
        os.mkdir(self.bin)
        for tool in ("bash", "sed", "head", "dirname", "id", "uname"):
            os.symlink(shutil.which(tool), os.path.join(self.bin, tool))
        for engine in ("podman", "docker") + (("runc",) if with_runc else ()):
            path = os.path.join(self.bin, engine)
            open(path, "w").write(FAKE)
            os.chmod(path, 0o755)
        self.log = os.path.join(tmp, "calls.jsonl")

    def kit(self, kit, args, host, images, cwd=None, engine=None):
        """(exit status, stderr, the engine's calls) of `KIT/kit ARGS` run from cwd."""
        open(self.log, "w").close()
        env = {"PATH": self.bin, "FAKE_LOG": self.log, "FAKE_HOST": host, "FAKE_IMAGES": " ".join(images)}
        if engine:
            env["KIT_CONTAINER_ENGINE"] = engine
        r = subprocess.run([os.path.join(kit, "kit"), "container"] + args, cwd=cwd or kit, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        calls = [json.loads(line) for line in open(self.log)]
        return r.returncode, r.stderr, calls


def used_lines(err):
    return [line for line in err.splitlines() if "using --" in line]


def check_fallbacks(host, kit):
    """A VM with hybrid cgroups: both fallbacks found, in order, each named once."""
    rc, err, calls = host.kit(kit, ["run", "run", "03"], "vm", [BASE, "pdlab"])
    if rc != 0:
        fail(f"run on the VM host: exit {rc}\n{err}")
    used = used_lines(err)
    if len(used) != 2 or "RLIMIT_NOFILE" not in used[0] or "hybrid" not in used[1]:
        fail(f"expected one line naming the ulimits, then one naming runc; got:\n{err}")
    last = calls[-1]
    if last[:4] != RUNC + ["run"] or not all(o in last for o in ULIMITS + [f"{kit}:/kit", "BUILD_DIR=build-container"]):
        fail(f"the run lacks the fallbacks or the mount: {last}")
    if last[-4:] != ["pdlab", "/kit/kit", "run", "03"] or "/kit" != last[last.index("-w") + 1]:
        fail(f"expected ./kit run 03 in pdlab, in /kit: {last}")
    if "--security-opt" in last or "--privileged" in last:
        fail(f"only ./kit grade gets the sandbox's options: {last}")
    rc, err, calls = host.kit(kit, ["run", "run", "03"], "vm-runc", [BASE, "pdlab"])
    used = used_lines(err)
    if rc != 0 or len(used) != 1 or not all(o in calls[-1] for o in ULIMITS) or "runc" in calls[-1]:
        fail(f"runc's RLIMIT_NOFILE error: expected the ulimits only: exit {rc}, {calls[-1]}\n{err}")


def check_grade(host, kit, tmp):
    """./kit grade from a class folder outside the kit: that folder mounted and
    the working folder inside; the sandbox's options added."""
    rc, err, calls = host.kit(kit, ["run", "grade", "class", "--lab", "03"], "ok", [BASE, "pdlab"], cwd=tmp)
    if rc != 0 or used_lines(err):
        fail(f"grade on a host where the defaults work: exit {rc}, fallbacks named:\n{err}")
    last = calls[-1]
    if f"{tmp}:{tmp}" not in last or last[last.index("-w") + 1] != tmp:
        fail(f"the caller's folder is not mounted as the working folder: {last}")
    if "--security-opt" not in last and "--privileged" not in last:
        fail(f"./kit grade runs without the sandbox's options: {last}")
    if last[-5:] != ["/kit/kit", "grade", "class", "--lab", "03"]:
        fail(f"expected ./kit grade class --lab 03: {last}")


def check_build(host, kit):
    """No image yet: run builds it from the Containerfile first, then runs."""
    rc, err, calls = host.kit(kit, ["run", "test", "tools"], "ok", [BASE])
    builds = [c for c in calls if "build" in c]
    if rc != 0 or len(builds) != 1 or builds[0][-4:] != ["pdlab", "-f", f"{kit}/Containerfile", kit]:
        fail(f"expected one build of the image, then the run: exit {rc}, calls {calls}\n{err}")
    if calls[-1][-3:] != ["/kit/kit", "test", "tools"]:
        fail(f"the run after the build: {calls[-1]}")


def check_gpu(host, kit):
    """--gpu: the pdlab-gpu image, built with GPU=1, run with the GPUs passed
    through (CDI on Podman, --gpus on Docker) and its own build folder."""
    rc, err, calls = host.kit(kit, ["run", "--gpu", "run", "02"], "ok", [BASE])
    builds = [c for c in calls if "build" in c]
    if rc != 0 or len(builds) != 1 or builds[0][-6:] != ["GPU=1", "-t", "pdlab-gpu", "-f", f"{kit}/Containerfile", kit]:
        fail(f"expected one build of pdlab-gpu with --build-arg GPU=1: exit {rc}, calls {calls}\n{err}")
    last = calls[-1]
    if "nvidia.com/gpu=all" not in last or "BUILD_DIR=build-container-gpu" not in last or last[-4:] != ["pdlab-gpu", "/kit/kit", "run", "02"]:
        fail(f"the GPU run: {last}")
    rc, err, calls = host.kit(kit, ["run", "--gpu", "run", "02"], "ok", [BASE, "pdlab-gpu"], engine="docker")
    if rc != 0 or calls[-1][calls[-1].index("--gpus") + 1] != "all":
        fail(f"docker's GPU run: exit {rc}, {calls[-1]}\n{err}")


def check_refusals(host, no_runc, kit):
    """Exit 2 with one clear message, and nothing built or run after it."""
    rc, err, calls = host.kit(kit, ["build"], "ok", [])
    if rc != 2 or "import" not in err or BASE not in err or any("build" in c for c in calls):
        fail(f"no base image and no registry: exit {rc}, calls {calls}\n{err}")
    rc, err, _ = host.kit(kit, ["run", "run", "03"], "broken", [BASE, "pdlab"])
    if rc != 2 or "iptables" not in err:
        fail(f"another failure must stop with its own error: exit {rc}\n{err}")
    rc, err, _ = no_runc.kit(kit, ["run", "run", "03"], "vm", [BASE, "pdlab"])
    if rc != 2 or "apt install runc" not in err:
        fail(f"hybrid cgroups without runc must say to install it: exit {rc}\n{err}")
    # Docker gets no Podman options: crun's error from it is passed on as it is.
    rc, err, calls = host.kit(kit, ["run", "run", "03"], "vm", [BASE, "pdlab"], engine="docker")
    if rc != 2 or "RLIMIT_NOFILE" not in err or any("--ulimit" in c for c in calls):
        fail(f"docker: exit {rc}, calls {calls}\n{err}")
    for args in (["shell"], ["run"], ["frobnicate"]):  # shell without a terminal; bad usage
        rc, err, calls = host.kit(kit, args, "ok", [BASE, "pdlab"])
        if rc != 2 or not err.startswith("kit container: error:") or any("run" in c for c in calls):
            fail(f"./kit container {' '.join(args)}: exit {rc}, calls {calls}\n{err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    kit = os.path.realpath(ap.parse_args().kit)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        host, no_runc = Host(tmp), Host(tmp, with_runc=False)
        check_fallbacks(host, kit)
        check_grade(host, kit, tmp)
        check_build(host, kit)
        check_gpu(host, kit)
        check_refusals(host, no_runc, kit)
    print("ok: fallbacks found and named, mounts, grade's options, missing image, the GPU variant, refusals")


if __name__ == "__main__":
    main()
