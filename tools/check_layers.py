#!/usr/bin/env python3
"""Checks that no file of the engine includes one of a higher layer.

The layers, bottom up (a file may include its own layer and those below):

  common    src/common.*            errors, formatting
  base      src/base/               the clock and timing statistics, hardware facts
  io        src/io/                 configs, checkpoints, tokenizers
  kernels   gpu/kernels/            the CUDA kernels and their launchers
  engine    src/engine/, gpu/host/  the forward pass on each device
  load      src/load/               --model resolved into a loaded Model
  measure   src/measure/            benchmarks, quality, the roofline
  serve     src/serve/              serving (track 2)
  pdlab     src/pdlab/, gpu/dev/    the command line and the GPU tools

Every file under src/ and gpu/ must belong to a layer: a new folder fails
until it is added to LAYERS here. Also, no file of labs/ but
labs/common/command_line.cpp includes CLI11: parsing it costs several CPU-seconds
in every file that does, and the lab programs declare their options through
labs/common/command_line.hpp instead. Usage: check_layers.py [KIT_ROOT]; exit 1
naming each back arrow (file:line, what it includes, both layers) and each
CLI11 include in labs/.
"""
import re
import sys
from pathlib import Path

# (folder relative to the kit, layer), most specific first.
LAYERS = [
    ("gpu/dev", "pdlab"),
    ("gpu/kernels", "kernels"),
    ("gpu/host", "engine"),
    ("src/base", "base"),
    ("src/io", "io"),
    ("src/engine", "engine"),
    ("src/load", "load"),
    ("src/measure", "measure"),
    ("src/serve", "serve"),
    ("src/pdlab", "pdlab"),
    ("src", "common"),
]
ORDER = ["common", "base", "io", "kernels", "engine", "load", "measure", "serve", "pdlab"]
SOURCES = (".hpp", ".cpp", ".h", ".cuh", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CLI11_INCLUDE = re.compile(r'^\s*#\s*include\s+<CLI/')
CLI11_IN_LABS = "labs/common/command_line.cpp"  # the one lab file that includes CLI11


def layer_of(path, root):
    rel = path.relative_to(root).as_posix()
    for folder, layer in LAYERS:
        if rel.startswith(folder + "/"):
            # src/<folder>/... that LAYERS does not name is a new, unplaced folder.
            if folder == "src" and "/" in rel[len("src/"):]:
                return None
            return layer
    return None


def resolve(name, including, root):
    """The file an #include "name" reaches: beside the includer, else under src/ or
    gpu/'s include folders (gpu/meson.build's gpu_inc)."""
    for base in (including.parent, root / "src", root / "gpu" / "kernels", root / "gpu" / "host"):
        candidate = base / name
        if candidate.is_file():
            return candidate.resolve()
    return None  # a library header ("hwy/...") or a generated one (source_root.hpp)


def cli11_in_labs(root):
    """file:line of each CLI11 include under labs/ but in CLI11_IN_LABS."""
    found = []
    for path in sorted(p for p in (root / "labs").rglob("*") if p.suffix in SOURCES):
        rel = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if rel != CLI11_IN_LABS and CLI11_INCLUDE.match(line):
                found.append(f"{rel}:{number}: includes CLI11; declare the options through "
                             "labs/common/command_line.hpp")
    return found


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = []
    files = sorted(p for d in ("src", "gpu") for p in (root / d).rglob("*") if p.suffix in SOURCES)
    for path in files:
        mine = layer_of(path, root)
        rel = path.relative_to(root)
        if mine is None:
            problems.append(f"{rel}: in no layer; add its folder to LAYERS in tools/check_layers.py")
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            target = m and resolve(m.group(1), path, root)
            if not target:
                continue
            theirs = layer_of(target, root)
            if theirs and ORDER.index(theirs) > ORDER.index(mine):
                problems.append(f"{rel}:{number}: {mine} includes {m.group(1)}, of the higher layer {theirs}")
    problems += cli11_in_labs(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s); the layers, bottom up: {', '.join(ORDER)}. Move the code down "
              "to the lowest layer that needs it, or the caller up.")
        return 1
    print(f"{len(files)} files, no include from a lower layer to a higher one ({' < '.join(ORDER)}); "
          f"CLI11 in labs/ only in {CLI11_IN_LABS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
