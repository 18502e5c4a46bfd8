#!/usr/bin/python3
"""Lab 16's program under mpirun on bad input: each case must exit 2 with one
line from rank 0 naming the problem (the other ranks stop quietly), never a
crash or a hang. Needs the reference solution: the rank count the model cannot
take is refused by the student's plan_shard (a starter stops with exit 3).

    /usr/bin/python3 tests/python/test_tp_cli.py --program build/labs/track4/16-tensor-parallel/16-tensor-parallel

  case              ranks  what                                         expected
  gqa_caps_ranks    4      --ranks 4 on tiny (2 KV heads)               exit 2, "KV heads"
  ranks_mismatch    2      --ranks 4 on 2 ranks                         exit 2, "mpirun started 2"
  bf16              2      --precision bf16                             exit 2, "f32"
  gpt2              2      a GPT-2 model                                exit 2, "Llama"
  past_context      2      --prompt-len 500 --steps 32 on tiny (512)    exit 2, "context"

mpirun runs as test_disagg_cli.py runs it (its run(): --oversubscribe, as
root where CI is root, shared memory only); Open MPI's own framed notices are
left out of stderr before it is judged.
Prints PASS/FAIL per case; exit 0 only if none failed.
"""
import sys

from test_disagg_cli import judge, program_or_skip, run

GPT2 = "synthetic:gpt2,dim=64,ffn=128,layers=2,heads=2,vocab=128,ctx=256"


def main():
    program = program_or_skip()
    cases = [
        ("gqa_caps_ranks", 4, ["--ranks", "4"], "KV heads"),
        ("ranks_mismatch", 2, ["--ranks", "4"], "mpirun started 2"),
        ("bf16", 2, ["--precision", "bf16"], "f32"),
        ("gpt2", 2, ["--model", GPT2], "Llama"),
        ("past_context", 2, ["--prompt-len", "500", "--steps", "32"], "context"),
    ]
    failed = 0
    for name, ranks, args, keyword in cases:
        rc, err, took = run(program, ranks, ["--threads", "1"] + args, timeout=120)
        failed += not judge(name, rc, err, took, keyword, 2, max_lines=1)  # rank 0 alone speaks
    print(f"{len(cases) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
