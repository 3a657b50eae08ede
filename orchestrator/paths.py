"""Where azbench's files live: its state under `$AZBENCH_HOME`, and the data it ships.

State (default ~/.azbench): azbench.db (SQLite store), clusters/<name>/ (local cluster state and
keys), runs/<run_id>/ (fetched logs), archive/ (raw logs by content hash).
Shipped data: templates/ and recipes/ live in orchestrator/_data/ in a wheel (hatch
force-include) and at the repository root in a source checkout.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.errors import LaunchError, StoreError

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


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write `path` whole or not at all: a temp file beside it, then a rename. On any failure the
    temp file is removed; a full disk is a StoreError (exit 6) naming the path."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreError(f"no space left on device writing {path}") from None
        raise
    return path


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


# -- where a run's files live --------------------------------------------------------------------
# The only place run and attempt paths are built: on the cluster (RunLayout, under its workdir;
# the batch templates receive these paths) and here (local_*: what azbench fetched home).

ATTEMPT_DIR = re.compile(r"^attempt-(\d+)$")
# Where an MLPerf recipe's data and containers are staged on a cluster's shared file system.
DEFAULT_DATA_ROOT = "/shared/mlperf"


@dataclass(frozen=True)
class RunLayout:
    """One run's directory on its cluster and the files in it."""

    run_dir: str

    @classmethod
    def of(cls, workdir: str, run_id: str) -> RunLayout:
        return cls(f"{workdir.rstrip('/')}/runs/{run_id}")

    @property
    def run_id(self) -> str:
        return PurePosixPath(self.run_dir).name

    @property
    def recipe(self) -> str:
        return f"{self.run_dir}/recipe"

    @property
    def checkpoints(self) -> str:
        return f"{self.run_dir}/checkpoints"

    def attempt_dir(self, attempt: int) -> str:
        return f"{self.run_dir}/attempt-{attempt}"

    def train_log(self, attempt: int) -> str:
        return f"{self.attempt_dir(attempt)}/train.log"

    def health_dir(self, attempt: int) -> str:
        return f"{self.run_dir}/health/attempt-{attempt}"

    @property
    def health_script(self) -> str:
        return f"{self.run_dir}/health/health_check.py"

    @staticmethod
    def parse(path: str) -> tuple[str, int, str] | None:
        """(run id, attempt, file name) of a path inside an attempt directory, else None."""
        parts = PurePosixPath(path).parts
        for i, part in enumerate(parts[1:-1], start=1):
            match = ATTEMPT_DIR.match(part)
            if match:
                return parts[i - 1], int(match.group(1)), "/".join(parts[i + 1:])
        return None


def local_attempt_dir(run_id: str, attempt: int) -> Path:
    return run_dir(run_id) / f"attempt-{attempt}"


def local_train_log(run_id: str, attempt: int) -> Path:
    return local_attempt_dir(run_id, attempt) / "train.log"


def safe_local_path(root: Path, name: str) -> Path:
    """root/name, or LaunchError when `name` could land outside root (absolute, .., symlinks)."""
    parts = name.split("/")  # split by hand: PurePosixPath would quietly fold "a/./b" and "a//b"
    bad = (
        len(parts) < 2
        or not ATTEMPT_DIR.fullmatch(parts[0])
        or any(part in ("..", ".", "") for part in parts)
        or any(ord(ch) < 32 or ch == "\\" for ch in name)
    )
    if bad:
        raise LaunchError(f"refusing remote log name {name!r}: not a plain path under attempt-N/")
    local = root.joinpath(*parts)
    # A symlink already inside dest (dest/attempt-1 -> /etc) would carry the copy outside.
    if not local.resolve().is_relative_to(root):
        raise LaunchError(f"refusing remote log name {name!r}: it resolves outside {root}")
    return local


def job_name(run_id: str, attempt: int) -> str:
    """The scheduler job name of an attempt: unique per cluster or workspace, so a crashed
    azbench finds (and adopts) what it submitted."""
    return f"azbench-{run_id}-a{attempt}"
