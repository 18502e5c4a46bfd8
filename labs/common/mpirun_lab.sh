# shellcheck shell=bash
# How ./kit starts a lab whose program runs as MPI ranks (labs 09 and 16).
# Sourced by the lab's own mpirun.sh, after it has defined
#   lab_name            e.g. "lab 09", for the messages
#   lab_ranks ARGS...   prints the rank count the arguments ask for
# with the lab's arguments: PROGRAM [ARGS...].
#
# The arguments are parsed once first, in one process (PDLAB_ARGS_ONLY=1):
# --help, and bad input's one message and exit 2, come from the program alone
# before any rank starts. Then, in the open:
#   mpirun -n RANKS --oversubscribe --bind-to none [--allow-run-as-root] PROGRAM ARGS...
# --oversubscribe: more ranks than cores is the normal case on a laptop. As
# root Open MPI wants to be told.
set -euo pipefail
: "${lab_name:?set by the lab mpirun.sh before it sources this file}"

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
  echo "error: $lab_name starts its ranks with mpirun, which is not installed: install Open MPI" \
       "(./kit setup, or apt-get install openmpi-bin libopenmpi-dev), then run it again." >&2
  exit 2
}

# --bind-to none: Open MPI pins each rank to one core when there are at most two,
# so a lone rank's OpenMP threads (--ranks 1 --threads 2) would share one core.
launch=(mpirun -n "$(lab_ranks "$@")" --oversubscribe --bind-to none)
[[ $(id -u) -ne 0 ]] || launch+=(--allow-run-as-root)
printf '\033[1mkit:\033[0m %s\n' "${launch[*]} $prog $*" >&2
exec "${launch[@]}" "$prog" "$@"
