"""The `toy:` section of a cluster spec: how many slots each toy node has, and its colour."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, StrictInt

from orchestrator.models import SpecSection


class ToySettings(SpecSection):
    KEY: ClassVar[str] = "toy"

    slots: StrictInt = Field(1, ge=1, le=8)
    colour: Literal["red", "blue"] = "red"
