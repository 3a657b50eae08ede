#!/usr/bin/env bash
# Install everything azbench and its tests need on a fresh Debian 12 machine:
# Debian packages (Slurm, munge, OpenSSH server, PostgreSQL), a virtualenv in .venv with the
# CPU build of PyTorch (the smoke recipe's dependency) and azbench with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

echo "==> Debian packages (slurm-wlm munge openssh-server postgresql python3-venv cloud-init)"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
  slurm-wlm munge openssh-server openssh-client postgresql python3 python3-venv python3-dev \
  procps iproute2 cloud-init >/dev/null

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> virtualenv .venv ($($PY --version))"
  "$PY" -m venv .venv
fi
echo "==> Python packages"
# torch is pinned to the CPU build: an unpinned torch pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[test,local]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import orchestrator, torch, sqlalchemy, paramiko, mlperf_logging; print('==> ready: torch', torch.__version__)"
