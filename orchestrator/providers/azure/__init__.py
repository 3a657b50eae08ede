"""The azure backend: ND H100 v5 / ND H200 v5 / ND GB200 v6 Slurm clusters through the Azure SDKs.

settings.py is its `azure:` spec section, props.py what its records keep, plan.py the pure plan
(resources, scale sets, cost, preflight list), provider.py the Provider; cluster.py builds its
Cluster record (one to_cluster for up and describe, and the provisional one); up.py creates,
teardown.py deletes and sweeps, preflight.py checks quota and sizes, resources.py builds the ARM
bodies, records.py turns SDK objects into typed records, cloudinit.py the VMs' cloud-init, lro.py
waits on long-running operations, boot.py waits for the VMs to boot, expiry.py and spot.py are
the self-expiry and spot-capacity helpers, clients.py builds the SDK clients. What it shares with
azureml (credentials, ARM errors, the throttle policy) is in providers/azure_shared/. Only these
modules import azure.*, and only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.base import Provider
from orchestrator.seams import Capabilities


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new AzureProvider (the Azure SDKs, where it uses them, load only now)."""
    from orchestrator.providers.azure.provider import AzureProvider
    return AzureProvider(progress=progress)


def _caps() -> Capabilities:
    from orchestrator.providers.azure.provider import AzureProvider
    return AzureProvider.caps


BACKEND = Backend(settings=AzureSettings, props=AzureProps, make=_make, caps=_caps,
                  region_required=True)
