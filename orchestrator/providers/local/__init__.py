"""The local backend: a real multi-node Slurm cluster emulated on this machine.

settings.py is its `local:` spec section, props.py what its records keep, provider.py the
Provider (plan, up, down, connect to a SlurmLauncher over a LocalRunner), cluster.py its
state.json and the Cluster built from it, proc.py its daemons, started and stopped by pid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import LOCAL_SKU, Backend
from orchestrator.providers.local.props import LocalProps
from orchestrator.providers.local.settings import LocalSettings
from orchestrator.providers.base import Provider


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new LocalProvider (its module loads only now, not at start-up)."""
    # Lazy: the registry loads this package for every stored local cluster (models.props_model:
    # status, report) and spec; provider.py would add ~70 ms to each (python -X importtime, best of 5).
    from orchestrator.providers.local.provider import LocalProvider
    return LocalProvider()


BACKEND = Backend(settings=LocalSettings, props=LocalProps, make=_make,
                  sku_required=False, only_sku=LOCAL_SKU,
                  # its nodes run recipes and the fabric test with this Python's torch
                  extra="local")
