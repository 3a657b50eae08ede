"""The azure backend: ND H100 v5 / ND H200 v5 / ND GB200 v6 Slurm clusters through the Azure SDKs.

settings.py is its `azure:` spec section, props.py what its records keep, plan.py the pure plan
(resources, scale sets, cost, preflight list), provider.py the Provider (core.py what its parts
share; one module per optional part: resizer.py, healer.py, ownership.py, liveview.py; readback.py
reads a cluster back from ARM); cluster.py builds its
Cluster record (one to_cluster for up and describe, and the provisional one); up.py creates
(drift.py refuses a rerun of another shape), teardown.py deletes and sweeps, preflight.py checks
quota, sizes and images, resources.py names the resources and builds the ARM bodies, lro.py
creates, adopts and deletes one resource through its long-running operation, boot.py waits for
the VMs to boot, status.py is ARM's view, owner.py who owns a cluster, expiry.py and spot.py the
self-expiry and spot-capacity helpers, roles.py the head identity's custom role (defined on the
cluster's group, assigned, deleted with it), heal.py replaces and resizes, guest_health.py reports bad
hosts, cloudinit.py the VMs' cloud-init, clients.py the management clients (AzureClients) and
every call made through them. clients.py and records.py are the SDK edge: only clients.py calls
the SDK's operation groups, only records.py reads the SDK's objects; the rest consumes typed
records (tests/test_layout.py holds the backend to it).
What it shares with azureml (credentials, ARM errors, the throttle policy, tags, the size and
quota checks, the ARM connection) is in providers/azure_shared/; it never imports azureml/.
Exposes: BACKEND (the registry's entry). azure.* is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.base import Provider


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new AzureProvider (the Azure SDKs, where it uses them, load only now)."""
    # Lazy: the registry loads this package for every stored azure cluster (models.props_model:
    # status, report) and spec; provider.py would add ~151 ms to each (python -X importtime, best of 5).
    from orchestrator.providers.azure.provider import AzureProvider
    return AzureProvider(progress=progress)


BACKEND = Backend(settings=AzureSettings, props=AzureProps, make=_make,
                  region_required=True,
                  extra="azure")
