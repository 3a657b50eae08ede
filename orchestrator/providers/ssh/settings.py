"""The `ssh:` section of a cluster spec: the login node of an existing Slurm cluster, its pinned
host key, and the shared directory every node sees. The ssh backend cannot do without it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, StrictInt

from orchestrator.models import SpecSection


class SshSettings(SpecSection):
    KEY: ClassVar[str] = "ssh"

    host: str
    port: StrictInt = Field(22, ge=1, le=65535)
    user: str
    key_path: Path
    known_hosts: Path | None = None
    host_key: str | None = None
    partition: str | None = None
    workdir: str = Field(description="a directory every node sees (shared filesystem)")
    env: dict[str, str] = Field(default_factory=dict)
