#!/usr/bin/env bash
# Install everything azbench and its tests need on a fresh Debian 12 machine:
# Debian packages (Slurm, munge, OpenSSH server, PostgreSQL), a virtualenv in .venv with the
# PyTorch 2.13.0 (the smoke recipe's dependency) and azbench with its test extra (every extra).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# A fresh machine may still be running unattended-upgrades (or another install): wait for
# dpkg's and the package lists' locks instead of failing at once.
APT=(apt-get -o DPkg::Lock::Timeout=600)

echo "==> Debian packages (slurm-wlm munge openssh-server postgresql python3-venv cloud-init sudo chromium nodejs)"
$SUDO "${APT[@]}" update -q
DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y -q --no-install-recommends \
  slurm-wlm munge openssh-server openssh-client postgresql python3 python3-venv python3-dev \
  procps iproute2 cloud-init sudo chromium chromium-driver >/dev/null
# Azurite (the Blob Storage emulator) comes from npm. Where Node.js is already installed from
# NodeSource (its nodejs bundles npm and conflicts with Debian's npm), use it as it is.
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y -q --no-install-recommends nodejs npm >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> virtualenv .venv ($($PY --version))"
  "$PY" -m venv .venv
fi
echo "==> Python packages"
# pip install, quiet; on failure show pip's own output and stop.
pip_install() {
  local log
  log=$(mktemp)
  if ! .venv/bin/python -m pip install -q "$@" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
}
pip_install --upgrade pip
# torch is pinned first: where a CPU wheel of 2.13.0 is on pip's find-links (as on the project's
# machines) pip takes it; otherwise PyPI's Linux wheel, which bundles CUDA (several GB) and runs
# on CPU too. Unpinned, a later extra would pull the newest CUDA build.
pip_install "torch==2.13.0"
# [test] is the test tools plus [all] (azure, azureml, blob, local, postgres, ssh): every test,
# the type checker and the contract suites run in this venv. The core alone is `pip install .`.
pip_install -e ".[test]"
.venv/bin/python -c "import orchestrator, torch, sqlalchemy, paramiko, mlperf_logging, azure.identity, azure.ai.ml, azure.storage.blob, psycopg; print('==> ready: torch', torch.__version__)"
# Azurite, the Azure Storage emulator the blob archive tests run against (tests/test_blob.py),
# from npm into a project-local folder: nothing global, removed with the checkout.
if command -v npm >/dev/null; then
  echo "==> Azurite (npm, into .tools/azurite)"
  npm install --prefix .tools/azurite --no-audit --no-fund --silent "azurite@3" >/dev/null
fi
