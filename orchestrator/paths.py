"""Where azbench's files live: its state under `$AZBENCH_HOME`, and the data it ships.

State (default ~/.azbench): azbench.db (SQLite store), clusters/<name>/ (local cluster state and
keys), runs/<run_id>/ (fetched logs), archive/ (raw logs by content hash).
Shipped data: templates/ and recipes/ live in orchestrator/_data/ in a wheel (hatch
force-include) and at the repository root in a source checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import StoreError

_PKG = Path(__file__).resolve().parent


def home() -> Path:
    return Path(os.environ.get("AZBENCH_HOME") or Path.home() / ".azbench").expanduser()


def ensure_home() -> Path:
    """Create $AZBENCH_HOME (0700) or raise StoreError saying why it is unusable."""
    root = home()
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        probe = root / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise StoreError(f"AZBENCH_HOME {root} is not writable: {exc.strerror or exc}") from None
    return root


def cluster_dir(name: str) -> Path:
    return home() / "clusters" / name


def run_dir(run_id: str) -> Path:
    return home() / "runs" / run_id


def archive_dir() -> Path:
    return home() / "archive"


def data_dir(name: str) -> Path:
    """`templates` or `recipes`: the installed copy if present, else the checkout's."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"azbench data folder '{name}' is missing from this installation")


def templates_dir() -> Path:
    return data_dir("templates")


def recipes_dir() -> Path:
    return data_dir("recipes")
