"""`up` for one Azure cluster: observe, preflight, then create only what is missing, in parallel.

Order: sign in (the caller's owner tags), read the resource group and, when it exists, what is in
it (one listing; adopt what exists, refuse what another cluster holds or a cluster someone else
created: owner.creator; refuse a request that differs from the live cluster: drift.py), preflight
the VMs still to create, then resource group (ARM's 201 Created is the proof this `up` made it:
on 200 it stops, lro._ensure_group); NSG and public IP; VNet + subnet; head NIC; head VM and every
GPU scale set at once (a thread pool). An `up` that created the group reads its tags again at the
end and restores its own when another writer replaced them (a same-name `up` that lost the race),
and says so (`up_notes`). A scale set that fails with
AllocationFailed/ZonalAllocationFailed is deleted and retried (tenacity) in the next zone of
`azure.zones`; when the zones are spent, the cluster's regional resources move to the next of
`azure.fallback_regions`. Quota and SkuNotAvailable fail fast; 429s wait out Retry-After within azure.throttle_budget_s
(azure_shared/throttle.py), 5xx stay with azure-core.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Callable, TypeVar

from orchestrator import paths
from orchestrator.providers.azure import cloudinit
from orchestrator.providers.azure import drift, expiry, roles
from orchestrator.providers.azure import resources
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.providers.azure.cluster import Found, to_cluster
from orchestrator.providers.azure.lro import (
    Aborted,
    ProgressCallback,
    Reporter,
    TokenStore,
    delete,
    ensure,
    observe,
)
from orchestrator.providers.azure.records import ArmResource, RoleDef, ScaleSet, Tagged
from orchestrator.providers.azure.owner import NotOwnerError, Owner, creator, creator_tag, foreign, signed_in
from orchestrator.providers.azure.preflight import PreflightNeed, preflight, resolve_ingress
from orchestrator.providers.azure.teardown import clear_group
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import CapacityError, ConfigError, ProvisionError
from orchestrator.providers.azure_shared.errors import AzureErrorMixin
from orchestrator.models import Cluster, ClusterState, Plan, ScaleSetPlan
from orchestrator.providers.azure.settings import AzureSettings
from orchestrator.providers.azure.props import AzureProps
from orchestrator.providers.azure_shared.errors import arm_call
from orchestrator.providers.azure_shared.tags import (TAG_CLUSTER, TAG_CREATED, TAG_CREATOR, TAG_EXPIRES, TAG_MAX_VMS,
                                                     TAG_NEXT_ID, TAG_RACK, TAG_SLOTS, TAG_SPOT_RESTORE)

LRO_FILE = "azure-lro.json"
T = TypeVar("T")


@dataclass
class Prefetched:
    """What `describe` read of the cluster just before this `up` (the same command): the group
    (None: read, absent), its scale sets and the head's public IP; None where it did not read."""

    group: ArmResource | None = None
    group_read: bool = False
    sets: list[ScaleSet] | None = None
    pip: ArmResource | None = None


@dataclass
class UpOptions:
    progress: ProgressCallback | None = None
    caller_ip_lookup: Callable[[], str] | None = None
    owner: str | None = None
    capacity_wait_s: float = 120.0
    workers: int = 8
    sleep: Callable[[float], None] | None = None
    now: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))


class UpRun:
    """One `up` of one cluster; see the module docstring."""

    def __init__(self, clients: AzureClients, spec: ClusterSpec, plan: Plan, opts: UpOptions,
                 prefetched: Prefetched | None = None) -> None:
        self.clients, self.spec, self.plan, self.opts = clients, spec, plan, opts
        self.prefetched = prefetched or Prefetched()
        self.created = False  # this `up` created the group (ARM answered 201)
        self.role_def: RoleDef | None = None  # the custom role as read while observing
        self.pip: ArmResource | None = None  # the head's public IP as created or read
        self.notes: tuple[str, ...] = ()  # what another writer did meanwhile (props.up_notes)
        self.names = resources.names_from_plan(plan)
        self.sku = spec.sku_row
        self.settings = spec.section(AzureSettings)  # the spec's `azure:` section
        self.cdir = paths.cluster_dir(spec.name)
        self.tokens = TokenStore(self.cdir / LRO_FILE)
        self.report = Reporter(opts.progress)
        self.sub = clients.subscription_id
        self.seen: dict[str, ArmResource | None] = {}
        self.me = Owner(principal="unknown", installation="unknown")  # execute() signs in

    def execute(self) -> Cluster:
        self.clients.throttle.reset(self.settings.throttle_budget_s)
        self.me = signed_in(self.clients, self.opts.owner)
        self.seen = self._observe_all()
        region = self._current_region()
        ingress = resolve_ingress(self.settings.ssh_ingress_cidr, self.opts.caller_ip_lookup)
        # Reads only so far: a request that differs from the live cluster stops here (exit 2).
        drift.check(self.spec, self.plan, ingress,
                    drift.live_shape(self.clients, self.names.rg, self.spec.name, self.seen, self.prefetched.sets),
                    resuming=self.tokens.pending())
        secrets = cloudinit.load_or_create_secrets(self.cdir)
        tags = self._tags()
        try:
            built = self._regions(region, ingress, secrets, tags)
        except BaseException:
            if self.created:
                self._restore_tags(tags, quiet=True)  # best effort: the error is what matters
            raise
        if self.created:
            self._restore_tags(tags)
        if self.notes:
            props = built.properties_as(AzureProps).model_copy(update={"interference": list(self.notes)})
            built = built.model_copy(update={"properties": props})
        return built

    def _regions(self, region: str, ingress: str, secrets: cloudinit.ClusterSecrets,
                 tags: dict[str, str]) -> Cluster:
        regions = [region] + [other for other in self.settings.fallback_regions if other != region]
        for here, following in zip(regions, regions[1:]):
            zones, image = self._preflight(here)
            try:
                return self._build(here, zones, image, ingress, secrets, tags)
            except CapacityError:
                self.report.emit("retry", resources.RG, self.names.rg, f"no capacity in {here}: moving to {following}")
                self._clear_regional()
                self.seen = self._observe_all()
        zones, image = self._preflight(regions[-1])
        return self._build(regions[-1], zones, image, ingress, secrets, tags)  # the last region: no fallback

    def _restore_tags(self, tags: dict[str, str], *, quiet: bool = False) -> None:
        """Read the group's tags again (this `up` created it) and, when another writer replaced
        them (the PUT of a same-name `up` that got 200: lro._ensure_group), put this `up`'s back
        and keep a note naming what the other writer had written."""
        rg = self.names.rg
        try:
            with arm_call(f"read the tags of resource group {rg}"):
                now = dict(self.clients.group(rg).tags)
            if all(now.get(key) == value for key, value in tags.items()):
                return
            with arm_call(f"restore the tags of resource group {rg}"):
                self.clients.replace_tags(resources.rid(self.sub, rg), tags)
        except Exception:
            if quiet:
                return
            raise
        theirs = foreign(now, self.me)
        who = theirs.describe() if theirs is not None else "no owner tags"
        note = (f"the tags of resource group {rg} were replaced while this `up` ran (owner tags then: {who}), "
                f"by a same-name `up` whose group PUT found the group made: restored this `up`'s")
        self.notes += (note,)
        self.report.emit("restored", resources.RG, rg, f"tags another writer replaced ({who})")

    def _preflight(self, region: str) -> tuple[list[str], dict[str, str]]:
        """The zones to try in `region` (azure.zones in the spec's region only) and the image."""
        zones = self.settings.zones if region == self.spec.region else []
        return zones, preflight(self.clients, self._need(region, zones))

    # ------------------------------------------------------------ observe + preflight
    def _observe_all(self) -> dict[str, ArmResource | None]:
        """Every planned resource as ARM has it: the group (read by describe just before, else a
        GET) and, when it exists, what is in it from one listing (plus the NSG's GET, whose SSH
        rule drift compares). A group someone else created stops here (NotOwnerError)."""
        names = self.names
        seen: dict[str, ArmResource | None] = {f"{kind}/{name}": None for kind, name in
                                                ((resources.NSG, names.nsg), (resources.PIP, names.pip),
                                                 (resources.VNET, names.vnet), (resources.NIC, names.nic),
                                                 (resources.VM, names.head))}
        seen.update({f"{resources.VMSS}/{scale_set.name}": None for scale_set in names.sets})
        ahead = self.prefetched
        group = ahead.group if ahead.group_read else observe(self.clients, names.rg, resources.RG, names.rg)
        ahead.group_read = False  # a second observation (region fallback) reads afresh
        seen[f"{resources.RG}/{names.rg}"] = group
        if group is None:
            return seen
        self._check_owner(resources.RG, names.rg, group)
        with arm_call(f"list resource group {names.rg}"):
            contents = self.clients.group_contents(names.rg)
        self._check_creator(group, [dict(item.tags) for item in contents])
        kinds = {kind.lower(): kind for kind in resources.KINDS}
        for item in contents:
            kind = kinds.get(item.type.lower())
            key = f"{kind}/{item.name}"
            if kind is None or key not in seen:
                continue
            seen[key] = _listed(item)
        if seen[f"{resources.NSG}/{names.nsg}"] is not None:
            seen[f"{resources.NSG}/{names.nsg}"] = observe(self.clients, names.rg, resources.NSG, names.nsg)
        for key, obs in seen.items():
            if obs is not None:
                kind, name = key.rsplit("/", 1)
                self._check_owner(kind, name, obs)
        return seen

    def _check_creator(self, group: ArmResource, children: list[dict[str, str]]) -> None:
        """Refuse (nothing written) a group of this cluster's name that someone else created, as
        the custom role's createdBy or the tags of what the group holds say (owner.creator). A group
        no evidence speaks for (made before creator tags, or without a custom role from
        another home) is taken when its owner tags name the signed-in principal: `up` only adds
        what is missing, it deletes nothing."""
        names = self.names
        if names.role and names.custom_role:
            self.role_def = roles.read_expiry_role(self.clients, names.rg)
        made = creator(self.me, subscription_id=self.sub, rg=names.rg, cluster=self.spec.name, tags=group.tags,
                       role_created_by=self.role_def.created_by if self.role_def else None, children=children,
                       role_read=bool(names.role and names.custom_role))
        if made.mine or (made.who == "unknown" and foreign(group.tags, self.me) is None):
            return
        raise NotOwnerError(f"cluster '{self.spec.name}' (resource group {names.rg}) is not yours: {made.describe()}; "
                            f"this is {self.me.describe()}", hint="pick another cluster name or azure.resource_group")

    def _check_owner(self, kind: str, name: str, obs: ArmResource) -> None:
        owner = obs.tags.get(TAG_CLUSTER)
        if owner != self.spec.name:
            what = f"owned by azbench cluster '{owner}'" if owner else "not created by azbench"
            # Found by the reads before any write: the name is taken, which the user fixes (exit 2).
            raise ConfigError(f"{kind.rsplit('/', 1)[-1]} {name} already exists and is {what}",
                              hint="pick another cluster name or azure.resource_group")

    def _current_region(self) -> str:
        for key, obs in self.seen.items():
            if obs is not None and not key.startswith(resources.RG) and obs.location:
                return obs.location
        return self.spec.region or ""

    def _need(self, region: str, zones: list[str]) -> PreflightNeed:
        new_vms = sum(planned.vms for planned in self.names.sets if not self._live(resources.VMSS, planned.name))
        return PreflightNeed(region=region, sku=self.sku, new_vms=new_vms, head_size=self.settings.head_size,
                             new_head=not self._live(resources.VM, self.names.head), zones=zones,
                             image=self.settings.image, spot=self.settings.priority == "spot")

    def _spot(self) -> resources.SpotTerms | None:
        settings = self.settings
        if settings.priority != "spot":
            return None
        return resources.SpotTerms(settings.eviction_policy, settings.max_price)

    def _live(self, kind: str, name: str) -> bool:
        seen = self.seen.get(f"{kind}/{name}")
        return seen is not None and seen.state != "Failed"

    def _tags(self) -> dict[str, str]:
        group = self.seen.get(f"{resources.RG}/{self.names.rg}")
        now, settings = self.opts.now(), self.settings
        spot = settings.priority == "spot"
        tags = resources.cluster_tags(self.spec.name, self.me.tags(), now + timedelta(hours=settings.expires_hours),
                                      dict(self.spec.tags), created=now,
                                      spot_restore_s=settings.spot_restore_timeout if spot else None)
        tags[TAG_CREATOR] = creator_tag(self.me, self.sub, self.names.rg, self.spec.name)
        if group is not None:  # a rerun keeps what the group says (owner, expiry, creation...),
            # as describe reads it from there: up and describe return the same record
            kept = (TAG_EXPIRES, TAG_CREATED, TAG_SPOT_RESTORE, TAG_CREATOR)
            tags.update({key: value for key, value in group.tags.items() if key in kept})
        return tags

    # ------------------------------------------------------------ creation
    def _build(self, region: str, zones: list[str], image: dict[str, str], ingress: str,
               secrets: cloudinit.ClusterSecrets, tags: dict[str, str]) -> Cluster:
        names, rg, settings = self.names, self.names.rg, self.settings
        subnet_cidr, head_ip = resources.subnet_layout(settings.vnet_cidr, self.plan.nodes)
        ids = {kind: resources.rid(self.sub, rg, kind, name) for kind, name in
               ((resources.NSG, names.nsg), (resources.PIP, names.pip), (resources.VNET, names.vnet),
                (resources.NIC, names.nic))}
        subnet_id = f"{ids[resources.VNET]}/subnets/{resources.SUBNET}"
        if self.seen.get(f"{resources.RG}/{rg}") is None:
            self._ensure(resources.RG, rg, lambda: {"location": self.spec.region, "tags": tags})
            self.created = True  # ARM answered 201 (a 200 raised LostRaceError)
            self.seen[f"{resources.RG}/{rg}"] = ArmResource(state="Succeeded", location=self.spec.region, tags=tags)
        else:
            self.report.emit("exists", resources.RG, rg)
        # The head's custom role right after the group (its only scope): a caller who may not
        # define roles learns it before any VM exists.
        role = self._expiry_role() if names.role and names.custom_role else None
        made_net = self._parallel({
            "nsg": lambda: self._ensure(resources.NSG, names.nsg, lambda: resources.nsg_body(region, tags, ingress)),
            "pip": lambda: self._ensure(resources.PIP, names.pip, lambda: resources.pip_body(region, tags))})
        self.pip = made_net["pip"]
        self._ensure(resources.VNET, names.vnet, lambda: resources.vnet_body(
            region, tags, settings.vnet_cidr, subnet_cidr, ids[resources.NSG]))
        self._ensure(resources.NIC, names.nic, lambda: resources.nic_body(
            region, tags, subnet_id, ids[resources.PIP], head_ip))
        sets = list(names.sets)
        agent = (expiry.agent_context(self.spec.name, self.sub, rg, self.clients.base_url, settings.idle_minutes)
                 if names.role else None)
        head_data = cloudinit.custom_data(cloudinit.head_cloud_init(
            self.spec.name, self.sku, sets, head_ip, subnet_cidr, secrets, expiry=agent,
            slurm_version=cloudinit.image_slurm(image)), "head")
        node_data = cloudinit.custom_data(cloudinit.node_cloud_init(
            self.spec.name, self.sku, sets, head_ip, secrets, spot=self._spot() is not None), "nodes")
        common = {"admin": settings.admin_user, "pubkey": secrets.admin_public_key}
        jobs: dict[str, Callable[[], ArmResource]] = {"head": lambda: self._ensure(
            resources.VM, names.head, lambda: resources.head_vm_body(
                region, tags, size=settings.head_size, image=resources.head_image(image), custom_data=head_data,
                nic_id=ids[resources.NIC], computer_name=cloudinit.head_hostname(self.spec.name),
                identity=names.role is not None, **common))}

        def vmss_body(scale_set: ScaleSetPlan, zone: str | None) -> object:
            # The set's slurm.conf slots (cloudinit.slot_count) ride on it, for replace and resize.
            rack = cloudinit.rack_of(self.sku, scale_set)
            slots = cloudinit.slot_count(scale_set, rack)
            set_tags = {**tags, TAG_SLOTS: str(slots), TAG_NEXT_ID: str(scale_set.vms),
                        TAG_MAX_VMS: str(settings.max_vms_per_scale_set), **({TAG_RACK: str(rack)} if rack > 1 else {})}
            return resources.vmss_body(region, set_tags, sku_name=self.sku.name, scale_set=scale_set, zone=zone,
                                       image=image, custom_data=node_data, subnet_id=subnet_id,
                                       prefix=cloudinit.computer_name_prefix(scale_set), spot=self._spot(), **common)
        for scale_set in sets:
            jobs[scale_set.name] = partial(self._ensure_vmss, region, zones, scale_set, partial(vmss_body, scale_set))
        made = self._parallel(jobs)
        if names.role:
            self._grant_self_delete(made["head"], role)
        return self._cluster(region, image, secrets, tags, head_ip)

    def _expiry_role(self) -> str:
        """The custom role of the head's expiry agent, defined (or found) on the cluster's group."""
        self.report.check()
        current: RoleDef | None | roles.Unread = self.role_def if not self.created else roles.UNREAD
        role, outcome = roles.ensure_expiry_role(self.clients, self.names.rg, creator=self.me.principal,
                                                 fresh=self.created, current=current)
        self.report.emit(outcome, resources.ROLE_DEF, roles.role_name(self.sub, self.names.rg),
                         f"read and delete {self.names.rg} only")
        return role

    def _grant_self_delete(self, head_vm: ArmResource, role: str | None) -> None:
        """The head's identity may delete this cluster's group, for its expiry agent."""
        names = self.names
        if not head_vm.principal_id:  # a listing (a rerun adopting the head) carries no identity:
            # the VM's own GET does (https://learn.microsoft.com/rest/api/compute/virtual-machines/get)
            head_vm = observe(self.clients, names.rg, resources.VM, names.head) or head_vm
        principal = expiry.head_principal(head_vm, names.head)
        self.report.check()
        outcome = roles.grant_self_delete(self.clients, names.rg, names.role or "", principal, role,
                                          fresh=self.created)
        what = "the custom self-expiry role" if role else "Contributor (fallback)"
        self.report.emit(outcome, resources.ROLE, names.role or "", f"{what} on {names.rg} for {names.head}'s identity")

    def _ensure(self, kind: str, name: str, body: Callable[[], object]) -> ArmResource:
        return ensure(self.clients, self.names.rg, kind, name, body, seen=self.seen.get(f"{kind}/{name}"),
                      tokens=self.tokens, report=self.report, cluster=self.spec.name)

    def _ensure_vmss(self, region: str, zones: list[str], scale_set: ScaleSetPlan,
                     body: Callable[[str | None], object]) -> ArmResource:
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed
        placements: list[str | None] = list(zones) or [None]
        retrying = Retrying(stop=stop_after_attempt(len(placements)), reraise=True,
                            wait=wait_fixed(self.opts.capacity_wait_s),
                            retry=retry_if_exception_type(CapacityError),
                            sleep=self.opts.sleep or _real_sleep)
        for attempt in retrying:
            with attempt:
                zone = placements[attempt.retry_state.attempt_number - 1]
                return self._create_vmss(region, zone, scale_set, body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _create_vmss(self, region: str, zone: str | None, scale_set: ScaleSetPlan,
                     body: Callable[[str | None], object]) -> ArmResource:
        name = scale_set.name
        key = f"{resources.VMSS}/{name}"
        seen = self.seen.get(key)
        if seen is not None and seen.state == "Failed":
            delete(self.clients, self.names.rg, resources.VMSS, name, self.report)
            self.seen[key] = None
        try:
            return self._ensure(resources.VMSS, name, lambda: body(zone))
        except CapacityError as exc:
            where = f"zone {zone} of {region}" if zone else region
            self.report.emit("retry", resources.VMSS, name, f"{_code(exc)} in {where}")
            delete(self.clients, self.names.rg, resources.VMSS, name, self.report)
            self.seen[key] = None
            raise

    def _clear_regional(self) -> None:
        names = self.names
        clear_group(self.clients, names.rg,
                    {resources.VMSS: [scale_set.name for scale_set in names.sets], resources.VM: [names.head],
                     resources.NIC: [names.nic], resources.VNET: [names.vnet], resources.PIP: [names.pip],
                     resources.NSG: [names.nsg]},
                    self.report, self.opts.workers)
        self.tokens.clear()

    def _parallel(self, jobs: Mapping[str, Callable[[], T]]) -> dict[str, T]:
        """Run independent jobs at once; on the first failure the others stop at their next step."""
        def stop_the_others(future: Future[T]) -> None:
            if future.exception() is not None:
                self.report.abort.set()
        with ThreadPoolExecutor(max_workers=max(1, min(self.opts.workers, len(jobs)))) as pool:
            futures = {key: pool.submit(job) for key, job in jobs.items()}
            for future in futures.values():
                future.add_done_callback(stop_the_others)
        errors = [exc for future in futures.values() if (exc := future.exception()) is not None]
        real = [error for error in errors if not isinstance(error, Aborted)]
        if real:
            # Capacity last: a fail-fast error (quota, SKU) is what the user must act on.
            real.sort(key=lambda error: isinstance(error, CapacityError))
            if all(isinstance(error, CapacityError) for error in real):
                self.report.abort.clear()
            raise real[0]
        if errors:
            raise errors[0]
        return {key: future.result() for key, future in futures.items()}

    def _cluster(self, region: str, image: dict[str, str], secrets: cloudinit.ClusterSecrets,
                 tags: dict[str, str], head_ip: str) -> Cluster:
        address = self.pip.public_ip if self.pip else None
        if not address and self.prefetched.pip is not None:
            address = self.prefetched.pip.public_ip  # describe read it a moment ago
        if not address:  # adopted from the group's listing, which carries no address
            pip = observe(self.clients, self.names.rg, resources.PIP, self.names.pip)
            address = pip.public_ip if pip else None
        if not address:
            raise ProvisionError(f"public IP {self.names.pip} has no address after creation")
        cloudinit.write_known_hosts(self.cdir, address, secrets.host_public_key)
        found = Found(name=self.spec.name, region=region, resource_group=self.names.rg, tags=tags,
                      subscription_id=self.sub, arm_endpoint=self.clients.base_url, sku=self.sku.name,
                      sets=self.names.sets, head_ip=address, head_private_ip=head_ip,
                      image=resources.image_text(image), admin_user=self.settings.admin_user, spot=self._spot(),
                      head_size=self.settings.head_size,
                      vms_per_rack=next((rack for rack in (cloudinit.rack_of(self.sku, planned)
                                                           for planned in self.names.sets) if rack > 1), None))
        return to_cluster(found, ClusterState.READY)


def _listed(item: Tagged) -> ArmResource:
    """A resource of the group's listing as `observe` would have read it: its state (a
    listing that carries none reads as Succeeded, as records does for an absent state), place,
    tags and a VM's identity; what only a GET has (addresses, rules) is None."""
    return ArmResource(state=item.state or "Succeeded", location=item.location, tags=item.tags,
                       principal_id=item.principal_id)


def _code(exc: CapacityError) -> str:
    """The ARM code of a capacity failure (an AzureCapacityError carries it)."""
    return exc.code if isinstance(exc, AzureErrorMixin) else "AllocationFailed"


def _real_sleep(seconds: float) -> None:
    import time
    time.sleep(seconds)

