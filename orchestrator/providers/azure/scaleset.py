"""A GPU scale set's body: the one place it is put together, for `up` (every set of the plan) and
for `resize` (a set added to a live cluster).

What the cluster's sets share (region, size, image, the nodes' cloud-init, subnet, login, spot
terms, the cluster's tags) is a `SetTemplate`; `body` adds what is the set's own: its name and
VM count, its zone, and the tags `replace` and `resize` read back (its slurm.conf slots, its next
instance id, its rack size, the cap on its VMs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.hardware.catalog import GpuSku
from orchestrator.models import ScaleSetPlan
from orchestrator.providers.azure import cloudinit, resources
from orchestrator.providers.azure_shared.tags import TAG_MAX_VMS, TAG_NEXT_ID, TAG_PARKED, TAG_RACK, TAG_SLOTS

if TYPE_CHECKING:
    from azure.mgmt.compute.models import VirtualMachineScaleSet


@dataclass(frozen=True)
class SetTemplate:
    """What every GPU scale set of one cluster shares. `tags` are the cluster's (a new set made
    by `resize` copies the first set's); `sku_name` is the size as ARM spells it."""

    location: str
    sku: GpuSku
    sku_name: str
    image: Mapping[str, str]
    custom_data: str
    subnet_id: str
    admin: str
    pubkey: str
    spot: resources.SpotTerms | None
    tags: Mapping[str, str]
    max_vms: int | None = None  # the cap written on each set (azure.max_vms_per_scale_set); None: keep the tags'


def body(template: SetTemplate, scale_set: ScaleSetPlan, zone: str | None) -> VirtualMachineScaleSet:
    """The PUT body of `scale_set` in `zone`: the template's shared parts, its own name, VMs and
    prefix, and its tags: its slurm.conf slots (cloudinit.slot_count), its next instance id (its
    VM count), the cap on its VMs and, on NVLink sizes, its rack size. A `parked` tag copied from
    another set is dropped (a new set parks nothing)."""
    rack = cloudinit.rack_of(template.sku, scale_set)
    tags = {**template.tags, TAG_SLOTS: str(cloudinit.slot_count(scale_set, rack)), TAG_NEXT_ID: str(scale_set.vms),
            **({TAG_MAX_VMS: str(template.max_vms)} if template.max_vms is not None else {}),
            **({TAG_RACK: str(rack)} if rack > 1 else {})}
    tags.pop(TAG_PARKED, None)
    return resources.vmss_body(template.location, tags, sku_name=template.sku_name, scale_set=scale_set, zone=zone,
                               image=dict(template.image), custom_data=template.custom_data,
                               subnet_id=template.subnet_id, prefix=cloudinit.computer_name_prefix(scale_set),
                               spot=template.spot, admin=template.admin, pubkey=template.pubkey)
