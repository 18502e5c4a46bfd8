#!/usr/bin/env python3
"""A lab 03 student who hard-codes the answers seen under the default seed (issue 12).

The student is the reference solution whose kv_cache_bytes, after the argument
checks, looks its inputs up in a table of the calls lab 03's tests make with
PDLAB_TEST_SEED unset, and falls back to a wrong formula (query heads instead
of KV heads: right for multi-head attention, wrong for GQA and MQA). Locally,
under the default seed, every lab03.bytes test passes (meson test
tools.hardcoder_default_seed); under the grader's hidden seed the drawn batch
sizes and token counts are new and the "cache bytes" check fails
(grade_hostile_class.py).

Usage:
  hardcoder.py SOLUTION OUT            writes the hard-coding student to OUT
  hardcoder.py SOLUTION OUT --record   writes a recorder instead: the solution
      printing "pdlab-record L H_kv D B S bytes -> result" for every call;
      build it as the student, run lab03_tests --test-case='lab03.bytes.*'
      with PDLAB_TEST_SEED unset, and paste the lines into SEEN below. Do that
      again when lab 03's bytes tests change what they draw.
"""
import sys
from pathlib import Path

# (n_layers, n_kv_heads, head_dim, batch, tokens, bytes_per_elem) -> bytes, as
# recorded from lab03_tests with PDLAB_TEST_SEED unset.
SEEN = """
pdlab-record 12 12 64 0 0 1 -> 0
pdlab-record 12 12 64 0 0 2 -> 0
pdlab-record 12 12 64 0 0 4 -> 0
pdlab-record 12 12 64 0 1 1 -> 0
pdlab-record 12 12 64 0 1 2 -> 0
pdlab-record 12 12 64 0 1 4 -> 0
pdlab-record 12 12 64 0 62 1 -> 0
pdlab-record 12 12 64 0 62 2 -> 0
pdlab-record 12 12 64 0 62 4 -> 0
pdlab-record 12 12 64 0 72791 1 -> 0
pdlab-record 12 12 64 0 72791 2 -> 0
pdlab-record 12 12 64 0 72791 4 -> 0
pdlab-record 12 12 64 1 0 1 -> 0
pdlab-record 12 12 64 1 0 2 -> 0
pdlab-record 12 12 64 1 0 4 -> 0
pdlab-record 12 12 64 1 1 1 -> 18432
pdlab-record 12 12 64 1 1 2 -> 36864
pdlab-record 12 12 64 1 1 4 -> 73728
pdlab-record 12 12 64 1 100 4 -> 7372800
pdlab-record 12 12 64 1 84 1 -> 1548288
pdlab-record 12 12 64 1 84 2 -> 3096576
pdlab-record 12 12 64 1 84 4 -> 6193152
pdlab-record 12 12 64 1 9327 1 -> 171915264
pdlab-record 12 12 64 1 9327 2 -> 343830528
pdlab-record 12 12 64 1 9327 4 -> 687661056
pdlab-record 12 12 64 25 0 1 -> 0
pdlab-record 12 12 64 25 0 2 -> 0
pdlab-record 12 12 64 25 0 4 -> 0
pdlab-record 12 12 64 25 1 1 -> 460800
pdlab-record 12 12 64 25 1 2 -> 921600
pdlab-record 12 12 64 25 1 4 -> 1843200
pdlab-record 12 12 64 25 59 1 -> 27187200
pdlab-record 12 12 64 25 59 2 -> 54374400
pdlab-record 12 12 64 25 59 4 -> 108748800
pdlab-record 12 12 64 25 71027 1 -> 32729241600
pdlab-record 12 12 64 25 71027 2 -> 65458483200
pdlab-record 12 12 64 25 71027 4 -> 130916966400
pdlab-record 12 4 64 0 0 1 -> 0
pdlab-record 12 4 64 0 0 2 -> 0
pdlab-record 12 4 64 0 0 4 -> 0
pdlab-record 12 4 64 0 1 1 -> 0
pdlab-record 12 4 64 0 1 2 -> 0
pdlab-record 12 4 64 0 1 4 -> 0
pdlab-record 12 4 64 0 62 1 -> 0
pdlab-record 12 4 64 0 62 2 -> 0
pdlab-record 12 4 64 0 62 4 -> 0
pdlab-record 12 4 64 0 72791 1 -> 0
pdlab-record 12 4 64 0 72791 2 -> 0
pdlab-record 12 4 64 0 72791 4 -> 0
pdlab-record 12 4 64 1 0 1 -> 0
pdlab-record 12 4 64 1 0 2 -> 0
pdlab-record 12 4 64 1 0 4 -> 0
pdlab-record 12 4 64 1 1 1 -> 6144
pdlab-record 12 4 64 1 1 2 -> 12288
pdlab-record 12 4 64 1 1 4 -> 24576
pdlab-record 12 4 64 1 100 4 -> 2457600
pdlab-record 12 4 64 1 84 1 -> 516096
pdlab-record 12 4 64 1 84 2 -> 1032192
pdlab-record 12 4 64 1 84 4 -> 2064384
pdlab-record 12 4 64 1 9327 1 -> 57305088
pdlab-record 12 4 64 1 9327 2 -> 114610176
pdlab-record 12 4 64 1 9327 4 -> 229220352
pdlab-record 12 4 64 25 0 1 -> 0
pdlab-record 12 4 64 25 0 2 -> 0
pdlab-record 12 4 64 25 0 4 -> 0
pdlab-record 12 4 64 25 1 1 -> 153600
pdlab-record 12 4 64 25 1 2 -> 307200
pdlab-record 12 4 64 25 1 4 -> 614400
pdlab-record 12 4 64 25 59 1 -> 9062400
pdlab-record 12 4 64 25 59 2 -> 18124800
pdlab-record 12 4 64 25 59 4 -> 36249600
pdlab-record 12 4 64 25 71027 1 -> 10909747200
pdlab-record 12 4 64 25 71027 2 -> 21819494400
pdlab-record 12 4 64 25 71027 4 -> 43638988800
pdlab-record 16 8 64 0 0 1 -> 0
pdlab-record 16 8 64 0 0 2 -> 0
pdlab-record 16 8 64 0 0 4 -> 0
pdlab-record 16 8 64 0 1 1 -> 0
pdlab-record 16 8 64 0 1 2 -> 0
pdlab-record 16 8 64 0 1 4 -> 0
pdlab-record 16 8 64 0 62 1 -> 0
pdlab-record 16 8 64 0 62 2 -> 0
pdlab-record 16 8 64 0 62 4 -> 0
pdlab-record 16 8 64 0 72791 1 -> 0
pdlab-record 16 8 64 0 72791 2 -> 0
pdlab-record 16 8 64 0 72791 4 -> 0
pdlab-record 16 8 64 1 0 1 -> 0
pdlab-record 16 8 64 1 0 2 -> 0
pdlab-record 16 8 64 1 0 4 -> 0
pdlab-record 16 8 64 1 1 1 -> 16384
pdlab-record 16 8 64 1 1 2 -> 32768
pdlab-record 16 8 64 1 1 4 -> 65536
pdlab-record 16 8 64 1 100 4 -> 6553600
pdlab-record 16 8 64 1 4096 2 -> 134217728
pdlab-record 16 8 64 1 84 1 -> 1376256
pdlab-record 16 8 64 1 84 2 -> 2752512
pdlab-record 16 8 64 1 84 4 -> 5505024
pdlab-record 16 8 64 1 9327 1 -> 152813568
pdlab-record 16 8 64 1 9327 2 -> 305627136
pdlab-record 16 8 64 1 9327 4 -> 611254272
pdlab-record 16 8 64 25 0 1 -> 0
pdlab-record 16 8 64 25 0 2 -> 0
pdlab-record 16 8 64 25 0 4 -> 0
pdlab-record 16 8 64 25 1 1 -> 409600
pdlab-record 16 8 64 25 1 2 -> 819200
pdlab-record 16 8 64 25 1 4 -> 1638400
pdlab-record 16 8 64 25 59 1 -> 24166400
pdlab-record 16 8 64 25 59 2 -> 48332800
pdlab-record 16 8 64 25 59 4 -> 96665600
pdlab-record 16 8 64 25 71027 1 -> 29092659200
pdlab-record 16 8 64 25 71027 2 -> 58185318400
pdlab-record 16 8 64 25 71027 4 -> 116370636800
pdlab-record 16 8 64 64 131072 2 -> 274877906944
pdlab-record 2 1 64 0 0 1 -> 0
pdlab-record 2 1 64 0 0 2 -> 0
pdlab-record 2 1 64 0 0 4 -> 0
pdlab-record 2 1 64 0 1 1 -> 0
pdlab-record 2 1 64 0 1 2 -> 0
pdlab-record 2 1 64 0 1 4 -> 0
pdlab-record 2 1 64 0 62 1 -> 0
pdlab-record 2 1 64 0 62 2 -> 0
pdlab-record 2 1 64 0 62 4 -> 0
pdlab-record 2 1 64 0 72791 1 -> 0
pdlab-record 2 1 64 0 72791 2 -> 0
pdlab-record 2 1 64 0 72791 4 -> 0
pdlab-record 2 1 64 1 0 1 -> 0
pdlab-record 2 1 64 1 0 2 -> 0
pdlab-record 2 1 64 1 0 4 -> 0
pdlab-record 2 1 64 1 1 1 -> 256
pdlab-record 2 1 64 1 1 2 -> 512
pdlab-record 2 1 64 1 1 4 -> 1024
pdlab-record 2 1 64 1 100 4 -> 102400
pdlab-record 2 1 64 1 1024 2 -> 524288
pdlab-record 2 1 64 1 84 1 -> 21504
pdlab-record 2 1 64 1 84 2 -> 43008
pdlab-record 2 1 64 1 84 4 -> 86016
pdlab-record 2 1 64 1 9327 1 -> 2387712
pdlab-record 2 1 64 1 9327 2 -> 4775424
pdlab-record 2 1 64 1 9327 4 -> 9550848
pdlab-record 2 1 64 25 0 1 -> 0
pdlab-record 2 1 64 25 0 2 -> 0
pdlab-record 2 1 64 25 0 4 -> 0
pdlab-record 2 1 64 25 1 1 -> 6400
pdlab-record 2 1 64 25 1 2 -> 12800
pdlab-record 2 1 64 25 1 4 -> 25600
pdlab-record 2 1 64 25 59 1 -> 377600
pdlab-record 2 1 64 25 59 2 -> 755200
pdlab-record 2 1 64 25 59 4 -> 1510400
pdlab-record 2 1 64 25 71027 1 -> 454572800
pdlab-record 2 1 64 25 71027 2 -> 909145600
pdlab-record 2 1 64 25 71027 4 -> 1818291200
pdlab-record 2 2 64 0 0 1 -> 0
pdlab-record 2 2 64 0 0 2 -> 0
pdlab-record 2 2 64 0 0 4 -> 0
pdlab-record 2 2 64 0 1 1 -> 0
pdlab-record 2 2 64 0 1 2 -> 0
pdlab-record 2 2 64 0 1 4 -> 0
pdlab-record 2 2 64 0 62 1 -> 0
pdlab-record 2 2 64 0 62 2 -> 0
pdlab-record 2 2 64 0 62 4 -> 0
pdlab-record 2 2 64 0 72791 1 -> 0
pdlab-record 2 2 64 0 72791 2 -> 0
pdlab-record 2 2 64 0 72791 4 -> 0
pdlab-record 2 2 64 1 0 1 -> 0
pdlab-record 2 2 64 1 0 2 -> 0
pdlab-record 2 2 64 1 0 4 -> 0
pdlab-record 2 2 64 1 1 1 -> 512
pdlab-record 2 2 64 1 1 2 -> 1024
pdlab-record 2 2 64 1 1 4 -> 2048
pdlab-record 2 2 64 1 100 4 -> 204800
pdlab-record 2 2 64 1 1024 2 -> 1048576
pdlab-record 2 2 64 1 84 1 -> 43008
pdlab-record 2 2 64 1 84 2 -> 86016
pdlab-record 2 2 64 1 84 4 -> 172032
pdlab-record 2 2 64 1 9327 1 -> 4775424
pdlab-record 2 2 64 1 9327 2 -> 9550848
pdlab-record 2 2 64 1 9327 4 -> 19101696
pdlab-record 2 2 64 25 0 1 -> 0
pdlab-record 2 2 64 25 0 2 -> 0
pdlab-record 2 2 64 25 0 4 -> 0
pdlab-record 2 2 64 25 1 1 -> 12800
pdlab-record 2 2 64 25 1 2 -> 25600
pdlab-record 2 2 64 25 1 4 -> 51200
pdlab-record 2 2 64 25 59 1 -> 755200
pdlab-record 2 2 64 25 59 2 -> 1510400
pdlab-record 2 2 64 25 59 4 -> 3020800
pdlab-record 2 2 64 25 71027 1 -> 909145600
pdlab-record 2 2 64 25 71027 2 -> 1818291200
pdlab-record 2 2 64 25 71027 4 -> 3636582400
pdlab-record 2 8 64 0 0 1 -> 0
pdlab-record 2 8 64 0 0 2 -> 0
pdlab-record 2 8 64 0 0 4 -> 0
pdlab-record 2 8 64 0 1 1 -> 0
pdlab-record 2 8 64 0 1 2 -> 0
pdlab-record 2 8 64 0 1 4 -> 0
pdlab-record 2 8 64 0 62 1 -> 0
pdlab-record 2 8 64 0 62 2 -> 0
pdlab-record 2 8 64 0 62 4 -> 0
pdlab-record 2 8 64 0 72791 1 -> 0
pdlab-record 2 8 64 0 72791 2 -> 0
pdlab-record 2 8 64 0 72791 4 -> 0
pdlab-record 2 8 64 1 0 1 -> 0
pdlab-record 2 8 64 1 0 2 -> 0
pdlab-record 2 8 64 1 0 4 -> 0
pdlab-record 2 8 64 1 1 1 -> 2048
pdlab-record 2 8 64 1 1 2 -> 4096
pdlab-record 2 8 64 1 1 4 -> 8192
pdlab-record 2 8 64 1 100 4 -> 819200
pdlab-record 2 8 64 1 1024 2 -> 4194304
pdlab-record 2 8 64 1 84 1 -> 172032
pdlab-record 2 8 64 1 84 2 -> 344064
pdlab-record 2 8 64 1 84 4 -> 688128
pdlab-record 2 8 64 1 9327 1 -> 19101696
pdlab-record 2 8 64 1 9327 2 -> 38203392
pdlab-record 2 8 64 1 9327 4 -> 76406784
pdlab-record 2 8 64 25 0 1 -> 0
pdlab-record 2 8 64 25 0 2 -> 0
pdlab-record 2 8 64 25 0 4 -> 0
pdlab-record 2 8 64 25 1 1 -> 51200
pdlab-record 2 8 64 25 1 2 -> 102400
pdlab-record 2 8 64 25 1 4 -> 204800
pdlab-record 2 8 64 25 59 1 -> 3020800
pdlab-record 2 8 64 25 59 2 -> 6041600
pdlab-record 2 8 64 25 59 4 -> 12083200
pdlab-record 2 8 64 25 71027 1 -> 3636582400
pdlab-record 2 8 64 25 71027 2 -> 7273164800
pdlab-record 2 8 64 25 71027 4 -> 14546329600
pdlab-record 4 2 32 0 0 1 -> 0
pdlab-record 4 2 32 0 0 2 -> 0
pdlab-record 4 2 32 0 0 4 -> 0
pdlab-record 4 2 32 0 1 1 -> 0
pdlab-record 4 2 32 0 1 2 -> 0
pdlab-record 4 2 32 0 1 4 -> 0
pdlab-record 4 2 32 0 62 1 -> 0
pdlab-record 4 2 32 0 62 2 -> 0
pdlab-record 4 2 32 0 62 4 -> 0
pdlab-record 4 2 32 0 72791 1 -> 0
pdlab-record 4 2 32 0 72791 2 -> 0
pdlab-record 4 2 32 0 72791 4 -> 0
pdlab-record 4 2 32 1 0 1 -> 0
pdlab-record 4 2 32 1 0 2 -> 0
pdlab-record 4 2 32 1 0 4 -> 0
pdlab-record 4 2 32 1 1 1 -> 512
pdlab-record 4 2 32 1 1 2 -> 1024
pdlab-record 4 2 32 1 1 4 -> 2048
pdlab-record 4 2 32 1 100 4 -> 204800
pdlab-record 4 2 32 1 84 1 -> 43008
pdlab-record 4 2 32 1 84 2 -> 86016
pdlab-record 4 2 32 1 84 4 -> 172032
pdlab-record 4 2 32 1 9327 1 -> 4775424
pdlab-record 4 2 32 1 9327 2 -> 9550848
pdlab-record 4 2 32 1 9327 4 -> 19101696
pdlab-record 4 2 32 25 0 1 -> 0
pdlab-record 4 2 32 25 0 2 -> 0
pdlab-record 4 2 32 25 0 4 -> 0
pdlab-record 4 2 32 25 1 1 -> 12800
pdlab-record 4 2 32 25 1 2 -> 25600
pdlab-record 4 2 32 25 1 4 -> 51200
pdlab-record 4 2 32 25 59 1 -> 755200
pdlab-record 4 2 32 25 59 2 -> 1510400
pdlab-record 4 2 32 25 59 4 -> 3020800
pdlab-record 4 2 32 25 71027 1 -> 909145600
pdlab-record 4 2 32 25 71027 2 -> 1818291200
pdlab-record 4 2 32 25 71027 4 -> 3636582400
pdlab-record 4 8 64 0 0 1 -> 0
pdlab-record 4 8 64 0 0 2 -> 0
pdlab-record 4 8 64 0 0 4 -> 0
pdlab-record 4 8 64 0 1 1 -> 0
pdlab-record 4 8 64 0 1 2 -> 0
pdlab-record 4 8 64 0 1 4 -> 0
pdlab-record 4 8 64 0 62 1 -> 0
pdlab-record 4 8 64 0 62 2 -> 0
pdlab-record 4 8 64 0 62 4 -> 0
pdlab-record 4 8 64 0 72791 1 -> 0
pdlab-record 4 8 64 0 72791 2 -> 0
pdlab-record 4 8 64 0 72791 4 -> 0
pdlab-record 4 8 64 1 0 1 -> 0
pdlab-record 4 8 64 1 0 2 -> 0
pdlab-record 4 8 64 1 0 4 -> 0
pdlab-record 4 8 64 1 1 1 -> 4096
pdlab-record 4 8 64 1 1 2 -> 8192
pdlab-record 4 8 64 1 1 4 -> 16384
pdlab-record 4 8 64 1 100 4 -> 1638400
pdlab-record 4 8 64 1 84 1 -> 344064
pdlab-record 4 8 64 1 84 2 -> 688128
pdlab-record 4 8 64 1 84 4 -> 1376256
pdlab-record 4 8 64 1 9327 1 -> 38203392
pdlab-record 4 8 64 1 9327 2 -> 76406784
pdlab-record 4 8 64 1 9327 4 -> 152813568
pdlab-record 4 8 64 25 0 1 -> 0
pdlab-record 4 8 64 25 0 2 -> 0
pdlab-record 4 8 64 25 0 4 -> 0
pdlab-record 4 8 64 25 1 1 -> 102400
pdlab-record 4 8 64 25 1 2 -> 204800
pdlab-record 4 8 64 25 1 4 -> 409600
pdlab-record 4 8 64 25 59 1 -> 6041600
pdlab-record 4 8 64 25 59 2 -> 12083200
pdlab-record 4 8 64 25 59 4 -> 24166400
pdlab-record 4 8 64 25 71027 1 -> 7273164800
pdlab-record 4 8 64 25 71027 2 -> 14546329600
pdlab-record 4 8 64 25 71027 4 -> 29092659200
"""

# The solution's kv_cache_bytes from the formula's comment to the end of the function.
CUT = "    // K and V, for every layer, sequence, KV head, position and head dimension.\n"

RECORD_BODY = """    const std::size_t result = std::size_t(2) * std::size_t(c.n_layers) * std::size_t(batch) *
        std::size_t(c.n_kv_heads) * std::size_t(tokens) * std::size_t(c.head_dim) * bytes_per_elem;
    std::fprintf(stderr, "pdlab-record %d %d %d %d %d %zu -> %zu\\n", c.n_layers, c.n_kv_heads, c.head_dim, batch,
                 tokens, bytes_per_elem, result);
    return result;
}
"""

LOOKUP_BODY = """    // The answers seen with PDLAB_TEST_SEED unset, keyed on the inputs.
    static const std::map<std::array<std::size_t, 6>, std::size_t> seen = {{
{entries}    }};
    const std::array<std::size_t, 6> key = {{std::size_t(c.n_layers), std::size_t(c.n_kv_heads),
        std::size_t(c.head_dim), std::size_t(batch), std::size_t(tokens), bytes_per_elem}};
    if (auto it = seen.find(key); it != seen.end()) return it->second;
    return std::size_t(2) * std::size_t(c.n_layers) * std::size_t(batch) * std::size_t(c.n_heads) *
           std::size_t(tokens) * std::size_t(c.head_dim) * bytes_per_elem;
}}
"""


def seen_entries():
    """The C++ initialisers of SEEN's lines: {{L, H_kv, D, B, S, bytes}, result},"""
    rows = []
    for line in SEEN.split("\n"):
        if line.startswith("pdlab-record "):
            args, result = line.removeprefix("pdlab-record ").split(" -> ")
            rows.append("        {{" + ", ".join(args.split()) + "}, " + result.strip() + "},\n")
    return "".join(sorted(set(rows)))


def student_of(solution, record=False):
    """The lab 03 solution with kv_cache_bytes's formula swapped for a lookup (or a recorder)."""
    head, cut, tail = solution.partition(CUT)
    if not cut:
        raise SystemExit(f"hardcoder.py: the lab 03 solution has no line {CUT.strip()!r} to cut at")
    rest = tail[tail.index("\n}\n") + 3:]  # what follows kv_cache_bytes
    body = RECORD_BODY if record else LOOKUP_BODY.format(entries=seen_entries())
    return "#include <array>\n#include <cstdio>\n#include <map>\n" + head + body + rest


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--record"]):
        raise SystemExit(__doc__)
    text = student_of(Path(sys.argv[1]).read_text(), record=sys.argv[3:] == ["--record"])
    Path(sys.argv[2]).write_text(text)
