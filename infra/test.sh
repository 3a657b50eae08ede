#!/usr/bin/env bash
# The test command: install what the tests need (infra/setup.sh), then run the type checker and
# the whole suite: unit tests, contract suites, and integration tests against real Slurm, sshd
# and PostgreSQL on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/setup.sh
# The type checker first (pyproject.toml [tool.mypy], strict): the Protocols (providers, launchers,
# runners) are proven by their implementations, and CI wants 0 errors.
echo "==> mypy"
.venv/bin/mypy
# The import graph (pyproject.toml [tool.importlinter]): the floors of docs/architecture.md, the
# backends reached only through the registry, dynamic imports only in the registry.
echo "==> lint-imports"
.venv/bin/lint-imports --no-cache
echo "==> pytest"
# Two workers (pytest-xdist), each taking whole test files (module-scoped clusters stay in one
# worker): the serial suite left a core idle about half the time. AZBENCH_TEST_WORKERS=0 runs it
# in one process.
exec .venv/bin/python -m pytest -q -ra -n "${AZBENCH_TEST_WORKERS:-2}" --dist loadfile "$@"
