#!/usr/bin/env bash
# The test command: install what the tests need (infra/setup.sh), then run the type checker and
# the whole suite: unit tests, contract suites, and integration tests against real Slurm, sshd
# and PostgreSQL on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/setup.sh
# The type checker first (pyproject.toml [tool.mypy]): the Protocols (providers, launchers,
# runners) are proven by their implementations, and CI wants 0 errors.
echo "==> mypy"
.venv/bin/mypy
echo "==> pytest"
# Two workers (pytest-xdist), each taking whole test files (module-scoped clusters stay in one
# worker): the serial suite left a core idle about half the time. AZBENCH_TEST_WORKERS=0 runs it
# in one process.
exec .venv/bin/python -m pytest -q -ra -n "${AZBENCH_TEST_WORKERS:-2}" --dist loadfile "$@"
