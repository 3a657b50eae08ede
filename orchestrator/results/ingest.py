"""Turn one result log into a ResultRow: parse, hash, archive the raw bytes.

Shared by `azbench run` (logs fetched from the cluster) and `azbench results import`. The
content hash makes ingest idempotent; the archive keeps the raw log next to the store.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from typing import BinaryIO
from pathlib import Path

from orchestrator import paths
from orchestrator.hardware.catalog import lookup
from orchestrator.errors import AzbenchError, ConfigError, StoreError
from orchestrator.models import Cluster
from orchestrator.results.files import open_regular
from orchestrator.store.schema import ResultRow
from orchestrator.results.compliance import in_container
from orchestrator.results.mllog import parse_file


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path, "log file") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_log(path: Path, content_hash: str, archive: Path | None = None) -> Path:
    """Copy `path` to `<archive>/<sha256>.log` atomically. An existing copy is kept only when it
    re-hashes to `content_hash` (a file planted or damaged under that name is replaced, never
    trusted by its name); the copy made is hashed as it is written, and one that does not
    match `content_hash` (the source changed) is a ConfigError that leaves nothing behind."""
    root = archive or paths.archive_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{content_hash}.log"
    if target.is_file() and not target.is_symlink() and _hash_of(target) == content_hash:
        return target
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        with open_regular(path, "log file") as src, open(tmp, "wb") as dst:
            hashing = _Hashing(dst)
            shutil.copyfileobj(src, hashing, 1 << 20)
        if hashing.digest.hexdigest() != content_hash:
            raise ConfigError(f"{path}: its content does not hash to {content_hash[:16]}... "
                              "(changed while it was archived?); nothing archived")
        os.replace(tmp, target)
    except BaseException as exc:  # a full disk or Ctrl-C leaves no partial copy behind
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreError(f"no space left on device archiving {path} in {root}") from None
        raise
    return target


class _Hashing:
    """A binary file that hashes what is written through it (sha256)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.digest, self.name = out, hashlib.sha256(), getattr(out, "name", "")

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def _hash_of(path: Path) -> str | None:
    """The sha256 of the file at `path`, None when it cannot be read as a regular file."""
    try:
        return file_hash(path)
    except (OSError, AzbenchError):
        return None


def result_from_run(log: Path, *, run_id: str, cluster: Cluster, nodes: int,
                    benchmark: str) -> ResultRow:
    """The ResultRow for a log that `azbench run` fetched from `cluster`."""
    summary = parse_file(log)
    verdict = in_container(summary.compliance_line)
    content_hash = file_hash(log)
    sku = lookup(cluster.sku)
    return ResultRow(
        content_hash=content_hash, run_id=run_id, source="run", submitter="azbench",
        system=f"{nodes}x{sku.name}", benchmark=summary.benchmark or benchmark,
        status="invalid" if summary.problems else summary.status or "incomplete",
        converged=summary.converged,
        minutes=summary.minutes, run_start_ms=summary.run_start_ms,
        run_stop_ms=summary.run_stop_ms, global_batch_size=summary.global_batch_size,
        nodes=nodes, gpus=nodes * sku.gpus_per_vm, sku=sku.name,
        resumed=summary.resume_step is not None, summary_json=summary.model_dump_json(),
        log_path=str(archive_log(log, content_hash)),
        compliance_ok=verdict.ok if verdict is not None and verdict.checked else None,
        compliance_json=verdict.model_dump_json() if verdict is not None else None,
    )
