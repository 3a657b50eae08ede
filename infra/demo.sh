#!/usr/bin/env bash
# The main job on this machine: a real 4-node Slurm cluster, the smoke benchmark at 1, 2 and 4
# nodes, the report, and tear-down. Uses a private AZBENCH_HOME unless one is set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/setup.sh
export AZBENCH_HOME="${AZBENCH_HOME:-$PWD/.azbench-demo}"
AZ=.venv/bin/azbench
trap '$AZ down local >/dev/null 2>&1 || true' EXIT
$AZ up --provider local --nodes 4
$AZ run smoke --cluster local --nodes 1,2,4
$AZ report --cluster local
$AZ down local
trap - EXIT
