#!/usr/bin/env bash
# How `./kit run 09` starts lab 09: under mpirun, one rank for the router and
# one for each worker, so --prefill P --decode D take 1 + P + D ranks.
#
#   labs/track2/09-disaggregation/mpirun.sh PROGRAM [ARGS...]
#
# The arguments are parsed once first, in one process (PDLAB_ARGS_ONLY=1):
# --help, and bad input's one message and exit 2, come from the program alone
# before any rank starts. Then, in the open:
#   mpirun -n 1+P+D --oversubscribe [--allow-run-as-root] PROGRAM ARGS...
# --oversubscribe: more ranks than cores is the normal case on a laptop (the
# router sleeps between polls). As root Open MPI wants to be told.
set -euo pipefail

prog="$1"
shift
rc=0
parsed="$(PDLAB_ARGS_ONLY=1 "$prog" "$@" 2>&1)" || rc=$?
if ((rc != 0)); then
  printf '%s\n' "$parsed" >&2
  exit "$rc"
fi
if [[ "$parsed" != PDLAB_ARGS_ONLY=1:* ]]; then  # --help: printed, nothing to run
  printf '%s\n' "$parsed"
  exit 0
fi
command -v mpirun >/dev/null || {
  echo "error: lab 09 starts its workers with mpirun, which is not installed: install Open MPI" \
       "(./kit setup, or apt-get install openmpi-bin libopenmpi-dev), then run ./kit run 09 again." >&2
  exit 2
}

# The worker counts as the program reads them: --prefill N or --prefill=N, the last one given.
prefill=1 decode=1 previous=""
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

launch=(mpirun -n $((1 + prefill + decode)) --oversubscribe)
[[ $(id -u) -ne 0 ]] || launch+=(--allow-run-as-root)
printf '\033[1mkit:\033[0m %s\n' "${launch[*]} $prog $*" >&2
exec "${launch[@]}" "$prog" "$@"
