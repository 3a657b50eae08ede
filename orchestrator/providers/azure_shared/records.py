"""The Compute RP answers both Azure backends read, as typed records: resource SKUs and vCPU usages.

The only place the shared code reads attributes of azure-mgmt-compute models. Nearly every field
of those models is Optional in the SDK (ARM omits what does not apply, e.g. `restrictions` of an
unrestricted size), so each reader says what an absent field means; the rest of the code sees
plain strings, ints and tuples. Enum-typed fields arrive as the SDK's str enums or, for values
the SDK does not know yet, as plain strings: `text` reads both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.mgmt.compute.models import ResourceSku, ResourceSkuRestrictions, Usage


@dataclass(frozen=True)
class Restriction:
    """One restriction of a size for this subscription (Resource SKUs API,
    ResourceSkuRestrictions): `kind` Location or Zone, where it applies, and why."""

    kind: str
    reason: str
    locations: tuple[str, ...]  # lower-case: the restriction's values and restrictionInfo.locations
    zones: tuple[str, ...]


@dataclass(frozen=True)
class SkuRow:
    """A resource SKU (a VM size) in one region as the Resource SKUs API lists it."""

    name: str
    resource_type: str
    family: str | None
    locations: tuple[str, ...]  # lower-case
    zones: tuple[str, ...]  # offered in the region (locationInfo[].zones), restricted ones included
    restrictions: tuple[Restriction, ...]
    capabilities: dict[str, str]

    def capability(self, name: str, default: int) -> int:
        """A numeric capability (e.g. vCPUs), or `default` when the row does not list it."""
        value = self.capabilities.get(name)
        return int(float(value)) if value is not None else default


@dataclass(frozen=True)
class QuotaRow:
    """One vCPU quota of a region: its name (a family such as standardNDSH100v5Family, or
    'cores' for the regional total), vCPUs in use and the limit."""

    name: str
    current: int
    limit: int

    @property
    def free(self) -> int:
        return self.limit - self.current


def text(value: object) -> str:
    """An SDK enum member (or the plain string ARM may send for one) as its string value;
    '' for an absent one."""
    if isinstance(value, Enum):
        return str(value.value)
    return str(value or "")


def sku_row(row: ResourceSku) -> SkuRow:
    """A resource SKU row; a size ARM lists without a field has none of it (no restrictions,
    no zones, no capabilities)."""
    caps: dict[str, str] = {}
    for c in row.capabilities or []:
        if c.name and c.value is not None:
            caps.setdefault(c.name, c.value)  # the first row of a name counts
    return SkuRow(name=row.name or "", resource_type=row.resource_type or "", family=row.family,
                  locations=tuple(loc.lower() for loc in row.locations or []),
                  zones=tuple(z for info in row.location_info or [] for z in info.zones or []),
                  restrictions=tuple(_restriction(r) for r in row.restrictions or []), capabilities=caps)


def compute_usage(row: Usage) -> QuotaRow:
    """A Compute RP usage row (`usage.list`): name.value, currentValue and limit are required
    in the API, so only an absent name value needs a default."""
    return QuotaRow(name=row.name.value or "", current=int(row.current_value), limit=int(row.limit))


def _restriction(r: ResourceSkuRestrictions) -> Restriction:
    info = r.restriction_info
    # The SDK's models are Mappings: `values` is the dict method, the field is values_property.
    where = list(r.values_property or []) + list((info.locations if info else None) or [])
    return Restriction(kind=text(r.type), reason=text(r.reason_code), locations=tuple(v.lower() for v in where),
                       zones=tuple((info.zones if info else None) or []))
