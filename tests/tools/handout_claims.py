#!/usr/bin/env python3
"""Sentences of a handout or an answer key that rest on a reference block must stay true.

    handout_claims.py [--answers ANSWERS.md] HANDOUT.md CLAIMS.toml [CLAIMS.toml ...]

A lab's claims.toml (beside its README.md; the answer key's beside answers.md in
solutions/, so that a student copy does not carry the answers) names numbers in
the handout's reference blocks and the sentences that rest on them:

    [values]                       # read from a reference block by a regex's first group
    one_rank = { block = "track4-16-large", pattern = 'one rank: decode step +([\\d.]+) ms' }
    rows = { block = "track3-13", pattern = '^ +(\\d+) +[\\d.]+ +([\\d.]+)', all = true }  # every match

    [derived]                      # Python expressions over the values, in order
    speedup = "one_rank / two_ranks"

    [[claim]]
    text = "two ranks made a decode step {speedup:.1f}x faster"   # filled in with the values
    holds = "speedup > 1.2"                                        # optional: a condition too
    file = "answers"               # optional: the answer key instead of the handout

Every reference block must also carry the machine line tools/reference-runs
writes under it, with other processes below its limit during the run.

The check: every value is found in its block; the claim's text, filled in (with
Python's format), stands in its file (white space folded, so a sentence may
wrap); its condition holds. Refresh a block (tools/reference-runs) so that a
number or a conclusion changes, and this names each sentence that no longer
follows. Exit 0 when every claim holds, 1 naming each one that does not.
"""
import argparse
import math
import re
import sys
import tomllib

FENCE = "```"
MARK = re.compile(r"^\s*<!-- reference-run: (\S+) .+ -->\s*$")
# The line tools/reference-runs writes under a block; its limit on other work during a run.
MACHINE = re.compile(r"\(reference machine: .+, kernels .+, \d+ cores, DRAM read .+, \d{4}-\d\d-\d\d, commit \S+; "
                     r"load average [\d.]+ before, other processes (?P<others>[\d.]+) cores during")
MAX_OTHER_CORES = 0.05
SAFE = {"abs": abs, "min": min, "max": max, "round": round, "len": len, "sorted": sorted, "all": all, "any": any,
        "zip": zip, "sum": sum, "int": int, "dict": dict, "math": math}


def blocks(text):
    """{name: the block's text} for every reference-run mark, and the machine line under it."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m or i + 1 >= len(lines) or lines[i + 1].strip() != FENCE:
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == FENCE), len(lines))
        out[m.group(1)] = "\n".join(lines[i + 2:end + 2])  # the machine line is part of the block
    return out


def fold(text):
    """Markdown as a reader sees its words: white space folded, emphasis and quote marks dropped."""
    text = re.sub(r"^\s*>\s?", "", text, flags=re.M)
    return re.sub(r"\s+", " ", text.replace("**", "").replace("`", "")).strip()


def number(text):
    """'1,234.5' -> 1234.5."""
    return float(text.replace(",", ""))


def values(claims, found, problems):
    """The named numbers of one claims file, read from the blocks, then the derived ones."""
    vals = {}
    for name, spec in claims.get("values", {}).items():
        block = found.get(spec["block"])
        if block is None:
            problems.append(f"value {name}: the handout has no reference block {spec['block']!r}")
            continue
        if spec.get("all"):  # every match: a list of numbers, or of tuples for several groups
            rows = [tuple(number(g) for g in m.groups()) for m in re.finditer(spec["pattern"], block, flags=re.M)]
            if not rows:
                problems.append(f"value {name}: pattern {spec['pattern']!r} not found in block {spec['block']!r}")
                continue
            vals[name] = [r[0] if len(r) == 1 else r for r in rows]
            continue
        m = re.search(spec["pattern"], block, flags=re.M)
        if not m:
            problems.append(f"value {name}: pattern {spec['pattern']!r} not found in block {spec['block']!r}")
            continue
        vals[name] = number(m.group(1))
    for name, expr in claims.get("derived", {}).items():
        try:
            vals[name] = eval(expr, {"__builtins__": {}, **SAFE, **vals})  # our own files, not input
        except (NameError, ZeroDivisionError, TypeError, IndexError, ValueError) as e:
            problems.append(f"derived {name} = {expr}: {e}")
    return vals


def check_claim(claim, vals, files, problems):
    """Appends to problems what is wrong with one claim."""
    where = claim.get("file", "handout")
    try:
        sentence = claim["text"].format(**vals)
    except KeyError as e:
        problems.append(f"claim {claim['text']!r}: no value {e}")
        return
    if fold(sentence) not in files[where]:
        problems.append(f"{where} no longer says: {sentence!r} (the numbers come from the reference block; "
                        "rerun tools/reference-runs, then mend the sentence or its claims.toml entry)")
    try:
        holds = "holds" not in claim or eval(claim["holds"], {"__builtins__": {}, **SAFE, **vals})
    except (NameError, ZeroDivisionError, TypeError, IndexError, ValueError) as e:
        problems.append(f"{where}: {sentence!r}: its condition {claim['holds']} fails to evaluate: {e}")
        return
    if not holds:
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in vals.items() if re.search(rf"\b{k}\b", claim["holds"]))
        problems.append(f"{where}: {sentence!r} no longer follows: {claim['holds']} is false ({shown})")


def machine_problems(found):
    """What is wrong with the machine lines: each block names its machine and a quiet run."""
    problems = []
    for name, block in found.items():
        m = MACHINE.search(block)
        if not m:
            problems.append(f"block {name}: no line '(reference machine: CPU, kernels ISA, N cores, DRAM read "
                            "..., DATE, commit C; load average L before, other processes X cores during ...)' "
                            "under it: make it with tools/reference-runs")
        elif float(m.group("others")) > MAX_OTHER_CORES:
            problems.append(f"block {name}: other processes used {m.group('others')} cores during its run, above "
                            f"tools/reference-runs' limit of {MAX_OTHER_CORES}: rerun it on a quiet machine")
    return problems


def check(handout, claims_files, answers=None):
    """(number of claims, [problems]) for one handout, its claims files and answer key."""
    text = open(handout, encoding="utf-8").read()
    files = {"handout": fold(text)}
    if answers:
        files["answers"] = fold(open(answers, encoding="utf-8").read())
    found, count = blocks(text), 0
    problems = machine_problems(found)
    for path in claims_files:
        with open(path, "rb") as f:
            claims = tomllib.load(f)
        vals = values(claims, found, problems)
        for claim in claims.get("claim", []):
            count += 1
            if claim.get("file", "handout") not in files:
                problems.append(f"claim {claim['text']!r} is about {claim['file']}, which was not given")
                continue
            check_claim(claim, vals, files, problems)
    return count, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("handout")
    ap.add_argument("claims", nargs="*")
    ap.add_argument("--answers", help="the lab's answer key (solutions/.../answers.md)")
    a = ap.parse_args()
    count, problems = check(a.handout, a.claims, a.answers)
    for p in problems:
        print(f"CLAIM FAILS: {p}")
    print(f"{a.handout}: {count} claims, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
