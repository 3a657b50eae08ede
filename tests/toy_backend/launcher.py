"""The toy launcher: it knows its cluster's nodes (all idle) and nothing else; every other
scheduler operation is MissingCapability, the typed answer the Launcher seam asks for."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster, JobRef, JobStatus, NodeInfo
from orchestrator.seams import LauncherParts

if TYPE_CHECKING:
    from orchestrator.models import AttemptSpec


class ToyLauncher:
    """Knows the cluster's nodes (all idle); every other scheduler operation is MissingCapability."""

    backend = "toy"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def node_states(self) -> dict[str, NodeInfo]:
        return {n: NodeInfo(name=n, state="idle") for n in self.cluster.node_names}

    def parts(self) -> LauncherParts:
        """No part: it runs nothing."""
        return LauncherParts()

    def close(self) -> None:
        pass

    def _cannot(self, what: str) -> NoReturn:
        raise MissingCapability(self.cluster.name, self.backend, what)

    def submit(self, attempt: AttemptSpec, recipe_dir: Path | None = None) -> JobRef:
        self._cannot("run jobs")

    def submit_script(self, script: str, *, workdir: str, files: Mapping[str, Path] | None = None) -> JobRef:
        self._cannot("run jobs")

    def find(self, name: str) -> JobRef | None:
        self._cannot("run jobs")

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobStatus]:
        self._cannot("run jobs")

    def cancel(self, ref: JobRef) -> None:
        self._cannot("run jobs")

    def fetch_logs(self, ref: JobRef, dest: Path) -> list[Path]:
        self._cannot("keep logs")

    def tail(self, path: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
        self._cannot("keep logs")

    def follow(self, ref: JobRef, path: str, sink: Callable[[bytes], None], *,
               stop: Callable[[], bool], offset: int = 0, interval: float = 1.0,
               sleep: Callable[[float], None] | None = None) -> int:
        self._cannot("keep logs")
