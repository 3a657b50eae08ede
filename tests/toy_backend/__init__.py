"""The toy backend: a test-only backend that proves a new backend is one folder and one registry
line. Only the tests register it (`orchestrator.backends.register("toy", "tests.toy_backend")`);
orchestrator/ never names it.

settings.py is its `toy:` spec section, props.py what its records keep, provider.py the Provider
(plan, up, describe, down, connect; its clusters live in `$AZBENCH_HOME/clusters/<name>/toy.json`),
launcher.py the launcher `connect` hands out (it lists the nodes; it runs nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.base import Provider
from tests.toy_backend.props import ToyProps
from tests.toy_backend.settings import ToySettings


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    from tests.toy_backend.provider import ToyProvider
    return ToyProvider()


BACKEND = Backend(settings=ToySettings, props=ToyProps, make=_make, sku_required=False)
