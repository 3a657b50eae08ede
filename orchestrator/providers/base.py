"""The Provider seam: where clusters come from, and how the code above reaches one.

Every provider (fake, local, ssh, azure, azureml) passes one contract suite,
tests/test_contracts_providers.py: `plan` is pure, `up` is idempotent, `describe` matches `up`,
`down` is idempotent, and every optional part it returns (`parts()`) works, each part's suite
run over the backends that have it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypedDict

from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster, ClusterState, Plan
from orchestrator.seams import Access, Traits

if TYPE_CHECKING:
    from orchestrator.specs.cluster import ClusterSpec


class CloudNode(TypedDict):
    """One VM as the cloud lists it (no login needed): host name, scale set, provisioning state."""

    name: str
    scale_set: str
    state: str


@dataclass(frozen=True)
class HostReport:
    """One node reported to the cloud as faulty: `status` "reported", "skipped" or "failed",
    `detail` the report's name or why not, `category` what it was reported as."""

    node: str
    status: str
    detail: str
    category: str = ""


@dataclass(frozen=True)
class CloudResource:
    """One compute resource as the cloud reports it: kind ("VM", "scale set"), name,
    provisioning state, and a detail (power state, instance counts)."""

    kind: str
    name: str
    state: str
    detail: str = ""


@dataclass(frozen=True)
class Billed:
    """Something the cloud bills by the hour while it exists: `count` VMs of `size` (the head,
    a scale set's instances). `size` is "" where the cloud did not say (not priced)."""

    what: str
    size: str
    count: int
    spot: bool = False  # spot priority: priced at the catalog's spot estimate


@dataclass(frozen=True)
class CloudView:
    """The cluster as its cloud sees it, read without logging in (`azbench status NAME`):
    whether it exists, its VMs and scale sets, the scale-set instances listed and running, the
    creation time, deadline and owner its tags hold (None where it has none), and whether it is
    being deleted or only partly there (`phase`)."""

    exists: bool
    resources: tuple[CloudResource, ...] = ()
    instances: int = 0
    running: int = 0
    created: datetime | None = None
    expires: datetime | None = None
    owner: str | None = None
    # "" (as built), "deleting" (the cloud is deleting it), or "partial" (some of what the record
    # names is missing or failed); `phase_detail` says what.
    phase: str = ""
    phase_detail: str = ""
    # What bills while it exists (VMs running or allocated; a deallocated VM bills no compute).
    billed: tuple[Billed, ...] = ()


@dataclass(frozen=True)
class Holding:
    """One resource `down` deletes with the cluster: its kind and name as the cloud lists them,
    and whether the backend made it (`ours`): one it did not is deleted only with --force."""

    kind: str
    name: str
    ours: bool = True
    billed: Billed | None = None  # what it bills by the hour, for the ones that do

    def describe(self) -> str:
        return f"{self.name} ({self.kind})" if self.ours else f"{self.name} ({self.kind}, not made by azbench)"


@dataclass(frozen=True)
class SetChange:
    """One group of nodes a resize changes (an Azure scale set): its nodes now and after."""

    name: str
    now: int
    after: int


@dataclass(frozen=True)
class SweepRequest:
    """What `azbench sweep` asks of a backend that sweeps: find (and unless `dry_run`, delete)
    the caller's expired clusters; `all_owners` adds other owners' expired ones. `known`: the
    cluster names with a live record in this home (None: do not compare). `only`: delete no
    cluster but these (the ones a confirmation listed). `account` and `endpoint` narrow where to
    look (a subscription id, a sovereign cloud's API endpoint); None takes the backend's default.
    `principal` stands in for the signed-in caller (tests)."""

    dry_run: bool = True
    known: Collection[str] | None = None
    all_owners: bool = False
    only: Collection[str] | None = None
    account: str | None = None
    endpoint: str | None = None
    now: datetime | None = None
    principal: str | None = None


SWEEP_ACTIONS = ("delete", "deleted", "failed", "kept", "skipped")


@dataclass(frozen=True)
class SweepItem:
    """One cluster found by `sweep`: why, what it holds, whose it is, and what sweep did.

    `action`: "delete" (expired: a dry run's, or before the question), "deleted", "failed"
    (`error` says why), "kept" (the caller's, live, unknown to this home: never deleted, only
    reported, `azbench adopt` takes it in), "skipped" (another owner's expired cluster while
    `all_owners` is off)."""

    cluster: str
    reason: str
    resource_groups: tuple[str, ...]
    resources: tuple[str, ...]
    expires: str | None
    deleted: bool
    owner: str = ""
    mine: bool = True
    action: str = "delete"
    error: str = ""
    # "cluster", or "role definition": a cluster's custom role left behind by a group that is
    # gone (`cluster` is then the role's name)
    what: str = "cluster"


# -- the optional parts: each a small Protocol, present or None in ProviderParts ---------------

class Resizer(Protocol):
    """A live cluster grown or shrunk (`azbench resize`), and what that would change."""

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        """Grow to `nodes` (fresh nodes, joined and idle) or shrink to it by retiring `remove`
        (the caller drained them first); the cluster as now described. CapacityError when
        growing needs more than the provider can get (its quota)."""
        ...

    def resize_preview(self, cluster: Cluster, nodes: int, remove: Sequence[str] = ()) -> list[SetChange]:
        """What `resize` to `nodes` (removing `remove` when it shrinks) would change, one entry
        per node group that changes; reads only, no login."""
        ...


class Expiry(Protocol):
    """A deadline the cluster enforces itself, kept in its cloud where `sweep` finds it."""

    def extend(self, cluster: Cluster, expires: datetime) -> None:
        """Move the cluster's self-enforced deadline."""
        ...

    def sweep(self, request: SweepRequest) -> list[SweepItem]:
        """The clusters in the cloud past their deadline, found by their tags, and (unless
        `request.dry_run`) deleted; one item each."""
        ...


class Healer(Protocol):
    """Nodes brought back or swapped for fresh ones by the provider."""

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        """Retire `node` for good and bring a fresh one up under a new name, joined to the
        scheduler and idle; the new node's name. The caller gates the new node before it
        counts as healthy."""
        ...

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        """Bring evicted nodes back; the host names now in the cluster.

        First waits, at most `evict_wait_s`, until `nodes` are really gone (deleted, deallocated,
        dead): a job leaves a noticed node before Azure evicts it, and a node restored while
        still up would count as capacity, then vanish under the next attempt. Past the wait it
        restores anyway (the eviction may have been called off)."""
        ...


class HostReports(Protocol):
    """Faulty hosts reported to the cloud (Azure Guest Health Reporting)."""

    def report_unhealthy(self, cluster: Cluster, reasons: Mapping[str, str]) -> list[HostReport]:
        """Report each drained node (node -> the gate's reason) to the cloud as a faulty host;
        one result per node."""
        ...


class Ownership(Protocol):
    """Who created a cluster, what it holds, and its record rebuilt from the cloud's tags. A
    backend without this part has no owners (whoever holds the record may delete it) and
    nothing to list beyond its nodes."""

    def foreign_owner(self, cluster: Cluster) -> str | None:
        """Why the live cluster is not the caller's (one phrase: who created it, or that no
        evidence says), or None when the caller created it. `down`, `extend`, `resize` and
        `adopt` refuse another's cluster without --force."""
        ...

    def holdings(self, cluster: Cluster) -> list[Holding]:
        """Everything `down` would delete, as the cloud lists it now, each marked whether the
        backend made it; reads only."""
        ...

    def adopt(self, name: str, *, account: str | None = None, endpoint: str | None = None,
              force: bool = False, resource_group: str | None = None) -> Cluster | None:
        """The live cluster `name` rebuilt from the cloud's tags and resources, for a home that
        has no record of it; None when the cloud holds none. NotOwnerError for another owner's
        unless `force`. `account` and `endpoint` as in SweepRequest; `resource_group`: the group
        the caller says holds it (a spec's custom one), else the backend's default name."""
        ...


class LiveView(Protocol):
    """The cluster as its cloud lists it, read without logging in (`azbench status`)."""

    def node_states(self, cluster: Cluster) -> Sequence[CloudNode]:
        """The cluster's VMs as the cloud lists them."""
        ...

    def live_view(self, cluster: Cluster) -> CloudView:
        """The cluster's resources and their states as the cloud reports them, no writes."""
        ...

    def overview(self, clusters: Sequence[Cluster]) -> dict[str, CloudView]:
        """The cloud's view of several clusters of this backend at once, from one listing of
        each kind: by name, exists, phase and what bills."""
        ...


class Preflight(Protocol):
    """The plan checked against the cloud before anything is written (`up --dry-run --check`)."""

    def check(self, spec: ClusterSpec, plan: Plan) -> tuple[list[str], list[str]]:
        """(one line per check as the cloud answered it, what would refuse `up`). Reads only."""
        ...


@dataclass(frozen=True)
class ProviderParts:
    """What a provider can do beyond plan, up, describe, down and connect: its traits (plain
    data) and each optional part, or None where it has none. A part is any object with the
    part's methods: the provider itself where it has them (mypy proves it conforms), or a small
    class of the backend's. A caller writes
    `if (r := provider.parts().resizer) is None: raise lacking(...)`, and mypy makes every caller
    handle the None."""

    traits: Traits = Traits()
    resizer: Resizer | None = None
    expiry: Expiry | None = None
    healer: Healer | None = None
    host_reports: HostReports | None = None
    ownership: Ownership | None = None
    live: LiveView | None = None
    preflight: Preflight | None = None

    def names(self) -> list[str]:
        """The parts present, by name (for --json, messages and the contract suite)."""
        parts = (("resizer", self.resizer), ("expiry", self.expiry), ("healer", self.healer),
                 ("host_reports", self.host_reports), ("ownership", self.ownership), ("live", self.live),
                 ("preflight", self.preflight))
        return [name for name, part in parts if part is not None]


# The one-line answer (MissingCapability, exit 7) for each operation of a part a backend lacks:
# what it cannot do, and the hint.
_LACKS: dict[str, tuple[str, str | None]] = {
    "resize": ("be resized while it runs", "`azbench down` it and `up` again at the new size"),
    "resize_preview": ("preview a resize", "only backends that resize (azure, local) show what a resize changes"),
    "extend": ("move its expiry", "only clusters that delete themselves (azure) expire"),
    "sweep": ("be swept", "its clusters hold no deadline the cloud can be searched by"),
    "replace_node": ("replace a node", "drain it (`azbench health`) and replace it by hand"),
    "restore_capacity": ("restore evicted capacity", "its nodes are left to their owner"),
    "report_unhealthy": ("report a faulty host to its cloud", "only Azure documents a way (Guest Health Reporting)"),
    "adopt": ("be adopted from its cloud's tags", "its clusters carry no tags to rebuild a record from"),
    "node_states": ("list its nodes without logging in", None),
    "live_view": ("report its resources without logging in", None),
    "check": ("check a plan against its cloud", "its `up` checks what it needs as it starts"),
}


def lacking(subject: str, provider: str, operation: str) -> MissingCapability:
    """The typed answer when `provider` has no part for `operation` (a key of _LACKS), about
    `subject` (a cluster's name): one line, exit 7. Callers raise it."""
    what, hint = _LACKS[operation]
    return MissingCapability(subject, provider, what, hint=hint)


class Provider(Protocol):
    """A source of clusters: what every backend does. Everything optional is a part
    (`parts()`: ProviderParts), present or None."""

    name: str

    def plan(self, spec: ClusterSpec) -> Plan:
        """Pure: what `up` would create. No credentials, no network, no side effects."""
        ...

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """The record stored (PROVISIONING) before `up` creates anything: enough for `down` to
        find and delete whatever a crashed `up` left behind. Pure."""
        ...

    def up(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """Create or adopt the cluster; idempotent (a rerun after a crash adopts what exists)."""
        ...

    def describe(self, name: str, spec: ClusterSpec | None = None) -> Cluster | None:
        """The live cluster or None; the provider's own state is the truth, the store a cache.
        The same record `up` returns (one to_cluster per provider). `spec`, when the caller has
        the cluster's spec, says where to look (a subscription, a workspace); without it the
        backend looks where its configuration says."""
        ...

    def down(self, cluster: Cluster) -> None:
        """Delete everything the cluster owns and verify it is gone; missing is success."""
        ...

    def connect(self, cluster: Cluster) -> Access:
        """The cluster's launcher, login shell (if any) and traits. Opens no connection until
        one is used; close the Access when done."""
        ...

    def parts(self) -> ProviderParts:
        """Its traits and optional parts (resize, expiry, healing, host reports, ownership, the
        live view, preflight checks); None for each it lacks. Cheap: builds no client."""
        ...


class ProviderBase:
    """What every backend shares: the provisional record of a plan."""

    name: str = "provider"

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """The plan's shape, PROVISIONING; a backend adds what its `down` needs to find it."""
        return Cluster(name=spec.name, provider=self.name, sku=plan.sku, nodes=plan.nodes,
                       region=plan.region, state=ClusterState.PROVISIONING,
                       cost_per_hour_usd=plan.cost_per_hour_usd)
