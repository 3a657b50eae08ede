"""Preflight for an Azure cluster: everything checked before the first PUT, failing in seconds.

Checks, with the exact shortfall in the message: the GPU and head sizes are offered in the region
(and zones) and not restricted for the subscription (resource SKUs); the family and total regional
vCPU quotas cover the VMs still to create (usages); the image exists with the right architecture
and Hyper-V Gen2 (for GB200 an arm64 Ubuntu-HPC image is resolved here); and the SSH ingress CIDR
is the caller's address or a configured range, never the whole internet. The size and quota
checks themselves are azure_shared/capacity.py's (azureml runs them too); this module says which
quotas the cluster's VMs draw on.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

from orchestrator.hardware.catalog import GpuSku
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.resources import image_reference, image_text
from orchestrator.providers.azure_shared.capacity import (
    LOW_PRIORITY_QUOTA,
    TOTAL_CORES,
    quota_problems,
    sku_problems,
    vm_sizes,
)
from orchestrator.providers.azure_shared.records import QuotaRow, SkuRow
from orchestrator.errors import PreflightError
from orchestrator.errors import CapacityError

HPC_PUBLISHER, HPC_OFFER = "microsoft-dsvm", "ubuntu-hpc"
CALLER_IP_ENV = "AZBENCH_CALLER_IP"
IP_ECHO_URL = "https://api.ipify.org"
GALLERY_API_VERSION = "2023-07-03"


@dataclass(frozen=True)
class PreflightNeed:
    region: str
    sku: GpuSku
    new_vms: int
    head_size: str
    new_head: bool
    zones: list[str] = field(default_factory=list)
    image: str | None = None
    spot: bool = False


def preflight(clients: AzureClients, need: PreflightNeed) -> dict[str, str]:
    """Raise PreflightError listing every shortfall; return the node image reference to use."""
    problems: list[str] = []
    rows: dict[str, SkuRow] = {}
    if need.new_vms or need.new_head:  # an adopting rerun skips the large SKU list
        rows = vm_sizes(clients, need.region)
    head_row = rows.get(need.head_size)
    if need.new_vms:
        problems += sku_problems(rows.get(need.sku.name), need.sku.name, need.region, need.zones)
    if need.new_head:
        problems += sku_problems(head_row, need.head_size, need.region, [])
    if need.new_vms or need.new_head:
        problems += _quota_problems(clients, need, head_row)
    image = None
    try:
        image = resolve_image(clients, need)
    except PreflightError as exc:
        problems.append(exc.message)
    if problems:
        raise PreflightError("; ".join(problems))
    assert image is not None
    return image


def check_report(clients: AzureClients, need: PreflightNeed) -> tuple[list[str], list[str]]:
    """What preflight reads, as results (`azbench up --dry-run --check`): reads only (resource
    SKUs, usages, images), no write. (one line per check as found, the problems)."""
    lines: list[str] = []
    problems: list[str] = []
    rows = vm_sizes(clients, need.region)
    head_row = rows.get(need.head_size)
    for name, zones in ((need.sku.name, need.zones), (need.head_size, [])):
        found = sku_problems(rows.get(name), name, need.region, zones)
        where = need.region + (f" zones {', '.join(zones)}" if zones else "")
        lines.append(f"checked: {name} in {where}: " + ("offered, not restricted" if not found else "; ".join(found)))
        problems += found
    usage, wants = _usage(clients, need.region), _wants(need, head_row)
    for quota, want in wants.items():
        row = usage.get(quota)
        if not want:
            continue
        if row is None:
            lines.append(f"checked: quota {quota} in {need.region}: not listed (need {want:,} vCPUs)")
        else:
            verdict = "ok" if row.free >= want else f"short by {want - row.free:,}"
            lines.append(f"checked: quota {quota} in {need.region}: {row.free:,} of {row.limit:,} vCPUs free, "
                         f"{want:,} needed: {verdict}")
    problems += quota_problems(usage, wants, need.region)
    try:
        image = resolve_image(clients, need)
        lines.append(f"checked: image {image_text(image)} exists for {need.sku.cpu_arch}, Hyper-V Gen2")
    except PreflightError as exc:
        lines.append(f"checked: image: {exc.message}")
        problems.append(exc.message)
    return lines, problems


def quota_check(clients: AzureClients, region: str, sku: GpuSku, new_vms: int, *, spot: bool = False) -> None:
    """Before a live cluster grows: the family and regional vCPU quotas (usages) cover `new_vms`
    more VMs, or CapacityError with the shortfall (one usages call)."""
    need = PreflightNeed(region=region, sku=sku, new_vms=new_vms, head_size="", new_head=False, spot=spot)
    problems = _quota_problems(clients, need, None)
    if problems:
        raise CapacityError(f"cannot add {new_vms} x {sku.name}: " + "; ".join(problems),
                            hint="ask for more quota (Azure portal, Quotas) or resize to fewer nodes")


def resolve_ingress(configured: str | None, lookup: Callable[[], str] | None = None) -> str:
    """SSH source CIDR: azure.ssh_ingress_cidr, else $AZBENCH_CALLER_IP, else lookup() (/32)."""
    if configured:
        net = ipaddress.ip_network(configured, strict=False)
    else:
        raw = os.environ.get(CALLER_IP_ENV) or (lookup or public_ip_lookup)()
        try:
            addr = ipaddress.ip_address(raw.strip())
        except ValueError:
            raise PreflightError(f"caller address '{raw.strip()[:60]}' is not an IP address",
                                 hint=f"set azure.ssh_ingress_cidr or {CALLER_IP_ENV}") from None
        net = ipaddress.ip_network(f"{addr}/{addr.max_prefixlen}")
    if net.prefixlen == 0:
        raise PreflightError(f"SSH ingress {net} would open port 22 to the whole internet",
                             hint="set azure.ssh_ingress_cidr to your own address, e.g. 203.0.113.7/32")
    return str(net)


def public_ip_lookup(url: str = IP_ECHO_URL, timeout_s: float = 5.0) -> str:
    """This machine's public address from an HTTPS echo service (the default caller lookup)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (fixed https URL)
            return str(resp.read(64).decode().strip())
    except OSError as exc:
        raise PreflightError(f"cannot detect your public address via {url}: {exc}",
                             hint=f"set azure.ssh_ingress_cidr or {CALLER_IP_ENV}") from None


def resolve_image(clients: AzureClients, need: PreflightNeed) -> dict[str, str]:
    """The node image reference, checked to exist for the size's architecture, Gen2."""
    arch = "Arm64" if need.sku.cpu_arch == "arm64" else "x64"
    image = need.image or need.sku.image
    if image.startswith("/"):
        _check_gallery_image(clients, image, arch)
        return image_reference(image)
    if ":" not in image:
        return _find_hpc_image(clients, need.region, arch)
    ref = image_reference(image)
    _check_urn(clients, need.region, ref, arch)
    return ref


def _quota_problems(clients: AzureClients, need: PreflightNeed, head_row: SkuRow | None) -> list[str]:
    return quota_problems(_usage(clients, need.region), _wants(need, head_row), need.region)


def _usage(clients: AzureClients, region: str) -> dict[str, QuotaRow]:
    """The subscription's vCPU quotas in `region` (one usages call), by quota name."""
    with arm_call(f"read vCPU quotas in {region}"):
        return {row.name: row for row in clients.vcpu_usages(region)}


def _wants(need: PreflightNeed, head_row: SkuRow | None) -> dict[str, int]:
    """vCPUs per quota for what `need` creates: the GPU VMs draw on their family (spot: the
    low-priority quota) and the regional total, the head on its family and the total."""
    head_vcpus = (head_row.capability("vCPUs", 8) if head_row is not None else 8) if need.new_head else 0
    wants: dict[str, int] = {}
    gpu_vcpus = need.sku.vcpus * need.new_vms
    if need.new_vms:
        wants[LOW_PRIORITY_QUOTA if need.spot else need.sku.quota_family] = gpu_vcpus
    if head_vcpus and head_row is not None and head_row.family:
        wants[head_row.family] = wants.get(head_row.family, 0) + head_vcpus
    wants[TOTAL_CORES] = (0 if need.spot else gpu_vcpus) + head_vcpus
    return wants


def _check_urn(clients: AzureClients, region: str, ref: dict[str, str], arch: str) -> None:
    version = ref["version"]
    urn = ":".join(ref[k] for k in ("publisher", "offer", "sku", "version"))
    with arm_call(f"check image {urn}"):
        if version == "latest":
            latest = _latest(clients, region, ref["publisher"], ref["offer"], ref["sku"])
            if latest is None:
                raise PreflightError(f"image {urn} has no versions in {region}")
            version = latest
        try:
            img = clients.vm_image(region, ref["publisher"], ref["offer"], ref["sku"], version)
        except Exception as exc:
            if is_not_found(exc):
                raise PreflightError(f"image {urn} does not exist in {region}") from None
            raise
    if img.architecture.lower() != arch.lower() or img.generation != "V2":
        raise PreflightError(f"image {urn} is {img.architecture} Hyper-V {img.generation}; "
                             f"the size needs {arch} Gen2")


def _check_gallery_image(clients: AzureClients, image: str, arch: str) -> None:
    """A gallery image (or one of its versions) exists and its definition's architecture fits.

    The architecture is a property of the image definition, x64 when absent
    (https://learn.microsoft.com/en-us/rest/api/compute/gallery-images/get, GalleryImageProperties);
    a version id is checked against its definition. Managed images carry no architecture.
    """
    with arm_call(f"check image {image}"):
        try:
            clients.gallery_architecture(image, GALLERY_API_VERSION)
        except Exception as exc:
            if is_not_found(exc):
                raise PreflightError(f"image {image} does not exist") from None
            raise
        low = image.lower()
        if "/galleries/" not in low or "/images/" not in low:
            return
        definition = image[:low.index("/versions/")] if "/versions/" in low else image
        got = clients.gallery_architecture(definition, GALLERY_API_VERSION)
    if got.lower() != arch.lower():
        raise PreflightError(f"image {image} is {got}; the size needs {arch}",
                             hint="pick an image built for the size's CPU (GB200's Grace is Arm64)")


def _find_hpc_image(clients: AzureClients, region: str, arch: str) -> dict[str, str]:
    with arm_call(f"list {HPC_OFFER} images in {region}"):
        skus = clients.image_skus(region, HPC_PUBLISHER, HPC_OFFER)
    # Newest release first; arm64-named SKUs first among equals.
    for sku in sorted(skus, key=lambda s: (s[:4], arch.lower() in s.lower()), reverse=True):
        ref = {"publisher": HPC_PUBLISHER, "offer": HPC_OFFER, "sku": sku, "version": "latest"}
        try:
            _check_urn(clients, region, ref, arch)
        except PreflightError:
            continue
        return ref
    raise PreflightError(f"no {arch} Gen2 {HPC_PUBLISHER}:{HPC_OFFER} image in {region}",
                         hint="set azure.image to a URN or a gallery image id")


def _latest(clients: AzureClients, region: str, publisher: str, offer: str, sku: str) -> str | None:
    names = clients.image_versions(region, publisher, offer, sku)
    return max(names, key=lambda v: [int(p) if p.isdigit() else -1 for p in re.split(r"[.]", v)]) if names else None
