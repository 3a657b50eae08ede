#!/bin/sh
# azbench fabric locate: one task of a collective over this job step's nodes (runs/locate.py).
# Usage: fabric_pair.sh PYTHON RUNNER ARGS... ; the rendezvous is the step's first node, at its
# scheduler address (as templates/fabric_test.sbatch.j2 finds it), on a port from the job id.
PY="$1"; shift
FIRST="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
ADDR="$(scontrol -o show node "$FIRST" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')"
export MASTER_ADDR="${ADDR:-$FIRST}"
# 30000-32699, as the health gate's and the fabric test's: clear of runs' ports and the ephemeral range.
export MASTER_PORT=$(( 30000 + SLURM_JOB_ID % 2700 ))
export OMP_NUM_THREADS=1
exec "$PY" "$@"
