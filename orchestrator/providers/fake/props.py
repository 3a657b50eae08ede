"""What a fake cluster records keep beyond the common fields: FakeProps, `Cluster.properties` for
provider 'fake' (read it with `cluster.properties_as(FakeProps)`)."""

from __future__ import annotations

from typing import Literal

from orchestrator.models import ProviderProps


class FakeProps(ProviderProps):
    """The fake provider's cluster: how many planned resources it pretends to hold."""

    kind: Literal["fake"] = "fake"
    resources: int | None = None
