#!/usr/bin/env bash
# The test command: install what the tests need (infra/setup.sh), then run the whole suite,
# unit tests and integration tests against real Slurm, sshd and PostgreSQL on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/setup.sh
exec .venv/bin/python -m pytest -q -ra "$@"
