"""The azureml backend: an AmlCompute cluster in an existing workspace, through azure-ai-ml.

settings.py is its `azureml:` spec section, props.py what its records keep, provider.py the
Provider, cluster.py its Cluster record (one to_cluster for up and describe, and the provisional
one), launcher.py the launcher that runs attempts as Azure ML command jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.providers.azureml.settings import AzureMLSettings
from orchestrator.providers.base import Provider
from orchestrator.seams import Capabilities


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new AzureMLProvider (the Azure SDKs, where it uses them, load only now)."""
    from orchestrator.providers.azureml.provider import AzureMLProvider
    return AzureMLProvider()


def _caps() -> Capabilities:
    from orchestrator.providers.azureml.provider import AzureMLProvider
    return AzureMLProvider.caps


BACKEND = Backend(settings=AzureMLSettings, props=AzureMLProps, make=_make, caps=_caps,
                  region_required=True)
