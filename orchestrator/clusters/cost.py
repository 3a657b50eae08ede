"""What a cluster costs at list price: the rate of what its cloud says bills (the catalog's
price per size, spot estimates for spot VMs; a size the catalog lacks is said, never guessed),
and the cost since creation. `status`, `down`'s question and `resize`'s question read it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from orchestrator.hardware.catalog import find
from orchestrator.models import Cluster, ClusterState
from orchestrator.providers.base import Billed, CloudView


@dataclass(frozen=True)
class Rate:
    """What a cluster's billed resources cost per hour, at list price: the total of the priced
    ones (None when none is priced), each part said, and what could not be priced."""

    per_hour: float | None
    parts: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()

    def say(self) -> str:
        """'1 x Standard_ND96isr_H100_v5 at $98.32/h, head Standard_D8s_v5 at $0.384/h'."""
        return ", ".join(self.parts + tuple(f"{u}: not priced" for u in self.unpriced))


def billed_rate(billed: Sequence[Billed]) -> Rate:
    """The list price per hour of what bills (the catalog's price for each size: its spot
    estimate for spot VMs). The one place a cluster's running cost is computed from what the
    cloud says exists; a size the catalog does not know is said, never guessed."""
    total, parts, unpriced = 0.0, [], []
    for item in billed:
        if item.count <= 0:
            continue
        row = find(item.size)
        price = (row.spot_price_per_hour_usd() if item.spot else row.price_per_hour_usd) if row else None
        label = f"{item.what} {item.size}" if item.count == 1 and item.what == "head" else \
            f"{item.count:,} x {item.size or 'unknown size'}"
        if price is None:
            unpriced.append(f"{item.what} {item.size or '(size not checked)'}" if item.what == "head" else label)
            continue
        total += item.count * price
        parts.append(f"{label} at {_usd(item.count * price)}/h")
    priced = bool(parts)
    return Rate(round(total, 3) if priced else None, tuple(parts), tuple(unpriced))


def _usd(value: float) -> str:
    """$98.32, $1,966.40; below a dollar every digit the catalog has ($0.384)."""
    return f"${value:,.2f}" if value >= 1 else f"${value:g}"


def spent_at(cluster: Cluster, rate: Rate, now: datetime | None = None, created: datetime | None = None) -> float | None:
    """List-price cost since creation at `rate` (what bills now), None when nothing is priced."""
    if rate.per_hour is None:
        return None
    end = now or datetime.now(timezone.utc)
    hours = max(0.0, (end - (created or cluster.created_at)).total_seconds() / 3600)
    return round(hours * rate.per_hour, 2)


def cost_so_far(cluster: Cluster, now: datetime | None = None) -> float | None:
    """List-price estimate since creation (None when the price is unknown)."""
    if cluster.cost_per_hour_usd is None:
        return None
    end = now or datetime.now(timezone.utc)
    hours = max(0.0, (end - cluster.created_at).total_seconds() / 3600)
    return round(hours * cluster.cost_per_hour_usd, 2)


def cost_now(cluster: Cluster, cloud: CloudView | None, created: datetime,
              now: datetime | None = None) -> tuple[Rate | None, float | None]:
    """(what bills per hour, the list-price cost since `created`): from what the cloud says
    still bills when there is a cloud view (whatever the record's state: a failed cluster whose
    GPU scale set is still there costs money), else from the record's price while it is ready."""
    if cloud is not None:
        if not cloud.exists:
            return None, None
        rate = billed_rate(cloud.billed)
        return rate, spent_at(cluster, rate, now, created)
    if cluster.state == ClusterState.READY:
        return None, cost_so_far(cluster.model_copy(update={"created_at": created}), now)
    return None, None


def gpus_of(cluster: Cluster) -> int | None:
    row = find(cluster.sku)
    return cluster.nodes * row.gpus_per_vm if row is not None else None


def price_of(cluster: Cluster) -> float | None:
    row = find(cluster.sku)
    return row.price_per_hour_usd if row is not None else None
