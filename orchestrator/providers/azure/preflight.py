"""Preflight for an Azure cluster: everything checked before the first PUT, failing in seconds.

Checks, with the exact shortfall in the message: the GPU and head sizes are offered in the region
(and zones) and not restricted for the subscription (resource SKUs); the family and total regional
vCPU quotas cover the VMs still to create (usages); the image exists with the right architecture
and Hyper-V Gen2 (for GB200 an arm64 Ubuntu-HPC image is resolved here); and the SSH ingress CIDR
is the caller's address or a configured range, never the whole internet.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from orchestrator.hardware.catalog import GpuSku
from orchestrator.providers.azure_shared.errors import arm_call, is_not_found
from orchestrator.providers.azure.resources import image_reference
from orchestrator.errors import PreflightError

HPC_PUBLISHER, HPC_OFFER = "microsoft-dsvm", "ubuntu-hpc"
CALLER_IP_ENV = "AZBENCH_CALLER_IP"
IP_ECHO_URL = "https://api.ipify.org"
GALLERY_API_VERSION = "2023-07-03"
# Spot VMs count against this regional quota ("Total Regional Low-priority vCPUs") instead of
# the size family's quota and the regional total.
LOW_PRIORITY_QUOTA = "lowPriorityCores"


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


def preflight(clients: Any, need: PreflightNeed) -> dict[str, str]:
    """Raise PreflightError listing every shortfall; return the node image reference to use."""
    problems: list[str] = []
    rows: dict[str, Any] = {}
    if need.new_vms or need.new_head:  # an adopting rerun skips the large SKU list
        with arm_call(f"list VM sizes in {need.region}"):
            rows = {s.name: s for s in clients.compute.resource_skus.list(filter=f"location eq '{need.region}'")
                    if s.resource_type == "virtualMachines"}
    head_row = rows.get(need.head_size)
    if need.new_vms:
        problems += _sku_problems(rows.get(need.sku.name), need.sku.name, need.region, need.zones)
    if need.new_head:
        problems += _sku_problems(head_row, need.head_size, need.region, [])
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


def quota_check(clients: Any, region: str, sku: GpuSku, new_vms: int, *, spot: bool = False) -> None:
    """Before a live cluster grows: the family and regional vCPU quotas (usages) cover `new_vms`
    more VMs, or CapacityError with the shortfall (one usages call)."""
    from orchestrator.errors import CapacityError
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
            return resp.read(64).decode().strip()
    except OSError as exc:
        raise PreflightError(f"cannot detect your public address via {url}: {exc}",
                             hint=f"set azure.ssh_ingress_cidr or {CALLER_IP_ENV}") from None


def resolve_image(clients: Any, need: PreflightNeed) -> dict[str, str]:
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


def _sku_problems(row: Any, name: str, region: str, zones: list[str]) -> list[str]:
    """What ARM would refuse for `name` in `region` (and `zones`), from its resource-SKU row.

    Restrictions as the Resource SKUs API documents them
    (https://learn.microsoft.com/en-us/rest/api/compute/resource-skus/list, ResourceSkuRestrictions):
    `type` Location (values: the locations) or Zone (restrictionInfo.locations and .zones), with
    `reasonCode` NotAvailableForSubscription or QuotaId. locationInfo.zones still lists a zone
    restricted for this subscription, so offered and usable are checked apart.
    """
    if row is None or region not in [loc.lower() for loc in (row.locations or [])]:
        return [f"{name} is not offered in {region}"]
    out = []
    restricted: set[str] = set()
    reasons: set[str] = set()
    for r in row.restrictions or []:
        kind = str(getattr(r.type, "value", r.type))
        reason = str(getattr(r.reason_code, "value", r.reason_code))
        info = getattr(r, "restriction_info", None)
        # Hybrid models are Mappings: `values` is the dict method, the field is values_property.
        where = [v.lower() for v in (getattr(r, "values_property", None) or [])
                 + list(getattr(info, "locations", None) or [])]
        if region not in where:
            continue
        if kind == "Location":
            out.append(f"{name} is restricted in {region} for this subscription ({reason})")
        elif kind == "Zone":
            restricted |= set(getattr(info, "zones", None) or [])
            reasons.add(reason)
    offered = {z for info in row.location_info or [] for z in (info.zones or [])}
    missing = [z for z in zones if z not in offered]
    if missing:
        out.append(f"{name} is not offered in zone(s) {', '.join(missing)} of {region} "
                   f"(offered: {', '.join(sorted(offered)) or 'none'})")
    refused = [z for z in zones if z in restricted and z in offered]
    if refused:
        usable = sorted(offered - restricted)
        out.append(f"{name} is restricted in zone(s) {', '.join(refused)} of {region} for this subscription "
                   f"({', '.join(sorted(reasons))}; usable zones: {', '.join(usable) or 'none'})")
    return out


def _quota_problems(clients: Any, need: PreflightNeed, head_row: Any) -> list[str]:
    with arm_call(f"read vCPU quotas in {need.region}"):
        usage = {u.name.value: u for u in clients.compute.usage.list(need.region)}
    head_vcpus = _capability(head_row, "vCPUs", 8) if need.new_head else 0
    wants: dict[str, int] = {}
    gpu_vcpus = need.sku.vcpus * need.new_vms
    if need.new_vms:
        wants[LOW_PRIORITY_QUOTA if need.spot else need.sku.quota_family] = gpu_vcpus
    if head_vcpus and head_row is not None and head_row.family:
        wants[head_row.family] = wants.get(head_row.family, 0) + head_vcpus
    wants["cores"] = (0 if need.spot else gpu_vcpus) + head_vcpus
    out = []
    for family, want in wants.items():
        if not want:
            continue
        label = {"cores": "total regional vCPUs",
                 LOW_PRIORITY_QUOTA: "Total Regional Low-priority vCPUs (lowPriorityCores)"}.get(family, family)
        row = usage.get(family)
        if row is None:
            out.append(f"quota {label} in {need.region}: not listed for this subscription "
                       f"(need {want:,} vCPUs)")
            continue
        free = int(row.limit) - int(row.current_value)
        if free < want:
            out.append(f"quota {label} in {need.region}: need {want:,} vCPUs, {free:,} free "
                       f"(limit {int(row.limit):,}, used {int(row.current_value):,})")
    return out


def _check_urn(clients: Any, region: str, ref: dict[str, str], arch: str) -> None:
    version = ref["version"]
    urn = ":".join(ref[k] for k in ("publisher", "offer", "sku", "version"))
    with arm_call(f"check image {urn}"):
        if version == "latest":
            latest = _latest(clients, region, ref["publisher"], ref["offer"], ref["sku"])
            if latest is None:
                raise PreflightError(f"image {urn} has no versions in {region}")
            version = latest
        try:
            img = clients.compute.virtual_machine_images.get(region, ref["publisher"], ref["offer"],
                                                            ref["sku"], version)
        except Exception as exc:
            if is_not_found(exc):
                raise PreflightError(f"image {urn} does not exist in {region}") from None
            raise
    got_arch, gen = _value(img.architecture) or "x64", _value(img.hyper_v_generation) or "V1"
    if got_arch.lower() != arch.lower() or gen != "V2":
        raise PreflightError(f"image {urn} is {got_arch} Hyper-V {gen}; the size needs {arch} Gen2")


def _check_gallery_image(clients: Any, image: str, arch: str) -> None:
    """A gallery image (or one of its versions) exists and its definition's architecture fits.

    The architecture is a property of the image definition, x64 when absent
    (https://learn.microsoft.com/en-us/rest/api/compute/gallery-images/get, GalleryImageProperties);
    a version id is checked against its definition. Managed images carry no architecture.
    """
    with arm_call(f"check image {image}"):
        try:
            clients.resources.resources.get_by_id(image, api_version=GALLERY_API_VERSION)
        except Exception as exc:
            if is_not_found(exc):
                raise PreflightError(f"image {image} does not exist") from None
            raise
        low = image.lower()
        if "/galleries/" not in low or "/images/" not in low:
            return
        definition = image[:low.index("/versions/")] if "/versions/" in low else image
        found = clients.resources.resources.get_by_id(definition, api_version=GALLERY_API_VERSION)
    props = getattr(found, "properties", None) or {}
    got = str(props.get("architecture") or "x64") if isinstance(props, dict) else "x64"
    if got.lower() != arch.lower():
        raise PreflightError(f"image {image} is {got}; the size needs {arch}",
                             hint="pick an image built for the size's CPU (GB200's Grace is Arm64)")


def _find_hpc_image(clients: Any, region: str, arch: str) -> dict[str, str]:
    with arm_call(f"list {HPC_OFFER} images in {region}"):
        skus = [s.name for s in clients.compute.virtual_machine_images.list_skus(region, HPC_PUBLISHER, HPC_OFFER)]
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


def _latest(clients: Any, region: str, publisher: str, offer: str, sku: str) -> str | None:
    rows = clients.compute.virtual_machine_images.list(region, publisher, offer, sku)
    names = [r.name for r in rows]
    return max(names, key=lambda v: [int(p) if p.isdigit() else -1 for p in re.split(r"[.]", v)]) if names else None


def _capability(row: Any, name: str, default: int) -> int:
    for cap in (row.capabilities if row is not None else None) or []:
        if cap.name == name:
            return int(float(cap.value))
    return default


def _value(x: Any) -> str | None:
    return None if x is None else str(getattr(x, "value", x))
