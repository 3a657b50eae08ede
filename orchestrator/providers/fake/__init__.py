"""The fake backend: Azure-shaped plans (provider.py) and clusters kept in a JSON file
(cluster.py), with failure switches; props.py is what its records keep. It reads no spec section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.fake.props import FakeProps
from orchestrator.providers.base import Provider


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new FakeProvider (its module loads only now, not at start-up)."""
    # Lazy: the registry loads this package for every stored fake cluster (models.props_model:
    # status, report) and spec; provider.py would add ~52 ms to each (python -X importtime, best of 5).
    from orchestrator.providers.fake.provider import FakeProvider
    return FakeProvider()


BACKEND = Backend(settings=None, props=FakeProps, make=_make)
