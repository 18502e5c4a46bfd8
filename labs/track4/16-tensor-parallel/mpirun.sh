#!/usr/bin/env bash
# How `./kit run 16` starts lab 16: under mpirun, --ranks R ranks, one model
# split over them.
#
#   labs/track4/16-tensor-parallel/mpirun.sh PROGRAM [ARGS...]
#
# The launch itself (arguments checked once, then mpirun): labs/common/mpirun_lab.sh.
set -euo pipefail
lab_name="lab 16"

# --ranks R or --ranks=R as the program reads it, the last one given (default 2).
lab_ranks() {
  local ranks=2 previous=""
  for arg in "$@"; do
    [[ "$previous" != --ranks ]] || ranks="$arg"
    [[ "$arg" != --ranks=* ]] || ranks="${arg#*=}"
    previous="$arg"
  done
  echo "$ranks"
}

# shellcheck source=../../common/mpirun_lab.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../common/mpirun_lab.sh"
