#!/usr/bin/env python3
"""gpu.archs: which GPU architectures a program's CUDA code is built for.

    fatbin_archs.py PROGRAM --expect 80,86,89,90 [--objcopy objcopy]

Lists the machine code (ELF, as `cuobjdump --list-elf` does) and the PTX in
the program's fat binary, and fails unless every architecture of --expect
(-Dgpu_archs) has machine code and the last also ships as PTX: a card whose
architecture is missing gets "no kernel image is available" at start-up.
cuobjdump is not in every CUDA install (nor on the CI machine), so this reads
the fat binary's headers itself: objcopy takes out the .nv_fatbin section,
a run of fat binaries, each a 16-byte header (magic 0xBA55ED50, version,
header size, payload size) and entries of which each header holds its kind
(1 PTX, 2 ELF) at byte 0, its header and payload sizes at 4 and 8, and its
architecture (80 for sm_80) at 28.
"""
import argparse
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def fatbin_entries(section):
    """(kind, arch) of every entry of every fat binary in the section's bytes."""
    entries = []
    at = 0
    while at + 16 <= len(section):
        magic, _version, header, size = struct.unpack_from("<IHHQ", section, at)
        if magic != FATBIN_MAGIC:
            if magic == 0:  # padding between the objects' fat binaries
                at += 8
                continue
            raise ValueError(f"no fat binary header at byte {at} (0x{magic:08x})")
        entry, end = at + header, at + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
            (arch,) = struct.unpack_from("<I", section, entry + 28)
            entries.append((kind, arch))
            entry += entry_header + payload
        at = end
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("--expect", required=True, help="comma-separated compute capabilities, e.g. 80,86,89,90")
    ap.add_argument("--objcopy", default="objcopy")
    a = ap.parse_args()
    expect = [int(x) for x in a.expect.split(",")]
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run([a.objcopy, "-O", "binary", "--only-section=.nv_fatbin", a.program, out.name], check=True)
        entries = fatbin_entries(open(out.name, "rb").read())
    elf = sorted({arch for kind, arch in entries if kind == KIND_ELF})
    ptx = sorted({arch for kind, arch in entries if kind == KIND_PTX})
    print(f"{a.program}: ELF " + " ".join(f"sm_{x}" for x in elf) + "; PTX " + " ".join(f"compute_{x}" for x in ptx))
    missing = [f"sm_{x} machine code" for x in expect if x not in elf]
    if expect[-1] not in ptx:
        missing.append(f"compute_{expect[-1]} PTX")
    if missing:
        print(f"FAIL: -Dgpu_archs={a.expect} but the program lacks " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
