"""What a toy cluster's record keeps beyond the common fields: ToyProps, `Cluster.properties` for
provider 'toy'."""

from __future__ import annotations

from typing import Literal

from orchestrator.models import ProviderProps


class ToyProps(ProviderProps):
    """A toy cluster: its nodes' slots and colour, as its spec's `toy:` section asked."""

    kind: Literal["toy"] = "toy"
    slots: int | None = None
    colour: str | None = None
