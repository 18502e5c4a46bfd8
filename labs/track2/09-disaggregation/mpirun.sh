#!/usr/bin/env bash
# How `./kit run 09` starts lab 09: under mpirun, one rank for the router and
# one for each worker, so --prefill P --decode D take 1 + P + D ranks.
#
#   labs/track2/09-disaggregation/mpirun.sh PROGRAM [ARGS...]
#
# The launch itself (arguments checked once, then mpirun): labs/common/mpirun_lab.sh.
# The router sleeps between polls, so more ranks than cores costs little.
set -euo pipefail
lab_name="lab 09"

# The worker counts as the program reads them: --prefill N or --prefill=N, the last one given.
lab_ranks() {
  local prefill=1 decode=1 previous=""
  for arg in "$@"; do
    case "$previous" in
      --prefill) prefill="$arg" ;;
      --decode) decode="$arg" ;;
    esac
    case "$arg" in
      --prefill=*) prefill="${arg#*=}" ;;
      --decode=*) decode="${arg#*=}" ;;
    esac
    previous="$arg"
  done
  echo $((1 + prefill + decode))
}

# shellcheck source=../../common/mpirun_lab.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../common/mpirun_lab.sh"
