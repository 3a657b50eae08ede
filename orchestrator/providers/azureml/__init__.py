"""The azureml backend: an AmlCompute cluster in an existing workspace, through azure-ai-ml.

settings.py is its `azureml:` spec section, props.py what its records keep, provider.py the
Provider (plan, preflight, up/adopt, describe, down), cluster.py its Cluster record (one
to_cluster for up and describe, the provisional one, and AmlTarget, the workspace), launcher.py
the launcher that runs attempts as Azure ML command jobs, clients.py every call made through
MLClient's operation groups, records.py the one module that reads azure-ai-ml's objects
(computes, jobs, nodes, usages) into typed records. What it shares with the
azure backend (credentials, ARM errors, tags, the size and quota checks, the ARM connection) is
in providers/azure_shared/; it never imports azure/.
Exposes: BACKEND (the registry's entry). azure.* is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.azureml.props import AzureMLProps
from orchestrator.providers.azureml.settings import AzureMLSettings
from orchestrator.providers.base import Provider


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new AzureMLProvider (the Azure SDKs, where it uses them, load only now)."""
    # Lazy: the registry loads this package for every stored azureml cluster (models.props_model:
    # status, report) and spec; provider.py would add ~23 ms to each (python -X importtime, best of 5).
    from orchestrator.providers.azureml.provider import AzureMLProvider
    return AzureMLProvider()


BACKEND = Backend(settings=AzureMLSettings, props=AzureMLProps, make=_make,
                  region_required=True,
                  extra="azureml")
