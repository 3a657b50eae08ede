"""Where azbench keeps its state: `$AZBENCH_HOME` (default ~/.azbench).

Layout: azbench.db (SQLite store), clusters/<name>/ (local cluster state and keys),
runs/<run_id>/ (fetched logs), archive/ (raw logs by content hash).
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import StoreError


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
