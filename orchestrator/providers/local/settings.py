"""The `local:` section of a cluster spec: how each emulated node is set up."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, StrictInt

from orchestrator.models import SpecSection


class LocalSettings(SpecSection):
    KEY: ClassVar[str] = "local"

    cpus_per_node: StrictInt = Field(1, ge=1, le=64)
    slurmd_timeout: StrictInt = Field(10, ge=5, le=600)
