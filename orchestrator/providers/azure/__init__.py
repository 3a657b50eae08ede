"""The azure backend: ND H100 v5 / ND H200 v5 / ND GB200 v6 Slurm clusters through the Azure SDKs.

provider.py is the Provider; cluster.py builds its Cluster record (one to_cluster for up and
describe, and the provisional one); up.py creates, teardown.py deletes and sweeps, preflight.py checks
quota and sizes, resources.py builds the ARM bodies, cloudinit.py the VMs' cloud-init, lro.py
waits on long-running operations, errors.py maps ARM errors, boot.py waits for the VMs to boot,
expiry.py and spot.py are the self-expiry and spot-capacity helpers, clients.py builds the SDK
clients. Only these modules import azure.*, and only inside functions.
"""

from orchestrator.providers.azure.provider import AzureProvider, sweep

__all__ = ["AzureProvider", "sweep"]
