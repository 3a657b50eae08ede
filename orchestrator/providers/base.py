"""The Provider seam: where clusters come from, and how the code above reaches one.

Every provider (fake, local, ssh, azure, azureml) passes one contract suite,
tests/test_contracts_providers.py: `plan` is pure, `up` is idempotent, `describe` matches `up`,
`down` is idempotent, and the capabilities it declares match what it does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypedDict

from orchestrator.errors import MissingCapability
from orchestrator.models import Cluster, ClusterState, Plan
from orchestrator.seams import Access, Capabilities

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


class Provider(Protocol):
    """A source of clusters. `caps` declares what its clusters can do; an operation whose
    capability is absent raises MissingCapability (ProviderBase supplies those answers)."""

    name: str
    caps: Capabilities

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

    def foreign_owner(self, cluster: Cluster) -> str | None:
        """Why the live cluster is not the caller's (one phrase: who created it, or that no
        evidence says), or None when the caller created it or the backend has no owners.
        `down`, `extend`, `resize` and `adopt` refuse another's cluster without --force."""
        ...

    def holdings(self, cluster: Cluster) -> list[Holding]:
        """Everything `down` would delete, as the cloud lists it now, each marked whether the
        backend made it; reads only. Empty where the backend has nothing to list."""
        ...

    def overview(self, clusters: Sequence[Cluster]) -> dict[str, CloudView]:
        """The cloud's view of several clusters of this backend at once, from one listing of
        each kind (`azbench status`): by name, exists, phase and what bills. Empty where the
        backend has no cloud to ask."""
        ...

    def resize_preview(self, cluster: Cluster, nodes: int, remove: Sequence[str] = ()) -> list[SetChange]:
        """What `resize` to `nodes` (removing `remove` when it shrinks) would change, one entry
        per node group that changes; reads only, no login (capability `resizes`)."""
        ...

    def connect(self, cluster: Cluster) -> Access:
        """The cluster's launcher, login shell (if any) and capabilities. Opens no connection
        until one is used; close the Access when done."""
        ...

    def extend(self, cluster: Cluster, expires: datetime) -> None:
        """Move the cluster's self-enforced deadline (capability `expires`)."""
        ...

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        """Bring evicted nodes back; the host names now in the cluster (`restores_capacity`).

        First waits, at most `evict_wait_s`, until `nodes` are really gone (deleted, deallocated,
        dead): a job leaves a noticed node before Azure evicts it, and a node restored while
        still up would count as capacity, then vanish under the next attempt. Past the wait it
        restores anyway (the eviction may have been called off)."""
        ...

    def node_states(self, cluster: Cluster) -> Sequence[CloudNode]:
        """The cluster's VMs as the cloud lists them (capability `live_node_states`)."""
        ...

    def live_view(self, cluster: Cluster) -> CloudView:
        """The cluster's resources and their states as the cloud reports them, no login and no
        writes (capability `live_node_states`)."""
        ...

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        """Retire `node` for good and bring a fresh one up under a new name, joined to the
        scheduler and idle; the new node's name (capability `replaces_nodes`). The caller
        gates the new node before it counts as healthy."""
        ...

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        """Grow to `nodes` (fresh nodes, joined and idle) or shrink to it by retiring `remove`
        (the caller drained them first); the cluster as now described (capability `resizes`).
        CapacityError when growing needs more than the provider can get (its quota)."""
        ...

    def report_unhealthy(self, cluster: Cluster, reasons: Mapping[str, str]) -> list[HostReport]:
        """Report each drained node (node -> the gate's reason) to the cloud as a faulty host;
        one result per node (capability `reports_hosts`)."""
        ...

    def sweep(self, request: SweepRequest) -> list[SweepItem]:
        """The clusters in the cloud past their deadline, found by their tags, and (unless
        `request.dry_run`) deleted; one item each (capability `sweeps`)."""
        ...

    def check(self, spec: ClusterSpec, plan: Plan) -> tuple[list[str], list[str]]:
        """The plan's preflight read, not written (`up --dry-run --check`): (one line per check
        as the cloud answered it, what would refuse `up`). Reads only."""
        ...

    def adopt(self, name: str, *, account: str | None = None, endpoint: str | None = None,
              force: bool = False) -> Cluster | None:
        """The live cluster `name` rebuilt from the cloud's tags and resources, for a home that
        has no record of it (capability `sweeps`: clusters findable by tag); None when the cloud
        holds none. NotOwnerError for another owner's unless `force`. `account` and `endpoint`
        as in SweepRequest."""
        ...


class ProviderBase:
    """The answers of a provider that lacks an optional capability: MissingCapability, typed."""

    name: str = "provider"
    caps: Capabilities = Capabilities()

    def provisional(self, spec: ClusterSpec, plan: Plan) -> Cluster:
        """The plan's shape, PROVISIONING; a backend adds what its `down` needs to find it."""
        return Cluster(name=spec.name, provider=self.name, sku=plan.sku, nodes=plan.nodes,
                       region=plan.region, state=ClusterState.PROVISIONING,
                       cost_per_hour_usd=plan.cost_per_hour_usd)

    def foreign_owner(self, cluster: Cluster) -> str | None:
        return None  # no owners: whoever holds the record may delete it

    def holdings(self, cluster: Cluster) -> list[Holding]:
        return []  # nothing listed: `down`'s question names the cluster's nodes only

    def overview(self, clusters: Sequence[Cluster]) -> dict[str, CloudView]:
        return {}  # no cloud to ask: the records stand as they are

    def resize_preview(self, cluster: Cluster, nodes: int, remove: Sequence[str] = ()) -> list[SetChange]:
        raise MissingCapability(cluster.name, self.name, "preview a resize",
                                hint="only backends that resize (azure) show what a resize changes")

    def extend(self, cluster: Cluster, expires: datetime) -> None:
        raise MissingCapability(cluster.name, self.name, "move its expiry",
                                hint="only clusters that delete themselves (azure) expire")

    def restore_capacity(self, cluster: Cluster, nodes: Collection[str] = (),
                         timeout_s: float | None = None, evict_wait_s: float = 0.0) -> list[str]:
        raise MissingCapability(cluster.name, self.name, "restore evicted capacity",
                                hint="its nodes are left to their owner")

    def node_states(self, cluster: Cluster) -> Sequence[CloudNode]:
        raise MissingCapability(cluster.name, self.name, "list its nodes without logging in")

    def live_view(self, cluster: Cluster) -> CloudView:
        raise MissingCapability(cluster.name, self.name, "report its resources without logging in")

    def replace_node(self, cluster: Cluster, node: str, timeout_s: float | None = None) -> str:
        raise MissingCapability(cluster.name, self.name, "replace a node",
                                hint="drain it (`azbench health`) and replace it by hand")

    def report_unhealthy(self, cluster: Cluster, reasons: Mapping[str, str]) -> list[HostReport]:
        raise MissingCapability(cluster.name, self.name, "report a faulty host to its cloud",
                                hint="only Azure documents a way (Guest Health Reporting)")

    def resize(self, cluster: Cluster, nodes: int, remove: Sequence[str] = (),
               timeout_s: float | None = None) -> Cluster:
        raise MissingCapability(cluster.name, self.name, "be resized while it runs",
                                hint="`azbench down` it and `up` again at the new size")

    def sweep(self, request: SweepRequest) -> list[SweepItem]:
        raise MissingCapability(f"{self.name} clusters", self.name, "be swept",
                                hint="its clusters hold no deadline the cloud can be searched by")

    def check(self, spec: ClusterSpec, plan: Plan) -> tuple[list[str], list[str]]:
        raise MissingCapability(spec.name, self.name, "check a plan against its cloud",
                                hint="its `up` checks what it needs as it starts")

    def adopt(self, name: str, *, account: str | None = None, endpoint: str | None = None,
              force: bool = False) -> Cluster | None:
        raise MissingCapability(name, self.name, "be adopted from its cloud's tags",
                                hint="its clusters carry no tags to rebuild a record from")
