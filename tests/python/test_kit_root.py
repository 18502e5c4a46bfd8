#!/usr/bin/python3
"""pdlab finds the kit's data/ from where it lies, never from a path compiled in
(src/base/kit_root.hpp):

  case            what                                              expected
  no_build_path   the program's bytes                               no trace of the source folder
  moved_alone     pdlab copied to an empty folder                   exit 2, one line naming PDLAB_KIT
  moved_beside    copied to KIT/bin, KIT/data leading to the data   generates
  variable        moved_alone with PDLAB_KIT=the source folder      generates
  meson_build     in BUILD/src/pdlab of a build folder outside the  generates (BUILD/meson-info names
                  kit (pdlab-grade's WORK/build from WORK/src)       the source folder)

    /usr/bin/python3 tests/python/test_kit_root.py --pdlab build/src/pdlab/pdlab --source .

Writes only under a temporary folder. Prints PASS/FAIL per case; exit 0 only if none failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

GENERATE = ["generate", "--prompt-ids", "1,2,3", "-n", "2"]


def run(program, env_extra=None):
    env = dict(os.environ)
    env.pop("PDLAB_KIT", None)
    env.update(env_extra or {})
    p = subprocess.run([program] + GENERATE, capture_output=True, text=True, env=env, timeout=120, cwd="/")
    return p.returncode, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    ap.add_argument("--source", required=True, help="the kit's source folder")
    a = ap.parse_args()
    source = os.path.realpath(a.source)
    failed = 0

    def judge(name, ok, detail):
        nonlocal failed
        print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failed += not ok

    with open(a.pdlab, "rb") as f:
        judge("no_build_path", source.encode() not in f.read(), f"{source} is compiled into {a.pdlab}")
    with tempfile.TemporaryDirectory() as tmp:
        alone = os.path.join(tmp, "alone", "pdlab")
        os.makedirs(os.path.dirname(alone))
        shutil.copy2(a.pdlab, alone)
        rc, err = run(alone)
        lines = err.strip().splitlines()
        judge("moved_alone", rc == 2 and len(lines) == 1 and "PDLAB_KIT" in err, f"exit {rc}, stderr {err!r}")
        kit = os.path.join(tmp, "kit")
        os.makedirs(os.path.join(kit, "bin"))
        os.symlink(os.path.join(source, "data"), os.path.join(kit, "data"))
        beside = os.path.join(kit, "bin", "pdlab")
        shutil.copy2(a.pdlab, beside)
        rc, err = run(beside)
        judge("moved_beside", rc == 0, f"exit {rc}, stderr {err!r}")
        rc, err = run(alone, {"PDLAB_KIT": source})
        judge("variable", rc == 0, f"exit {rc}, stderr {err!r}")
        build = os.path.join(tmp, "build")
        os.makedirs(os.path.join(build, "meson-info"))
        os.makedirs(os.path.join(build, "src", "pdlab"))
        with open(os.path.join(build, "meson-info", "meson-info.json"), "w") as f:
            json.dump({"directories": {"source": source, "build": build}}, f)
        built = os.path.join(build, "src", "pdlab", "pdlab")
        shutil.copy2(a.pdlab, built)
        rc, err = run(built)
        judge("meson_build", rc == 0, f"exit {rc}, stderr {err!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
