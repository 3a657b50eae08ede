"""The Provider contract (providers/base.py), proven against every provider in the registry.

Each provider runs against the real thing or the fake it is tested with elsewhere: fake (its JSON
file), local (a real one-node Slurm cluster), ssh (the session's real sshd in front of the
session's local Slurm cluster), azure (the real azure-mgmt clients against the loopback fake ARM)
and azureml (the real MLClient against the fake ARM with Azure ML's routes). Per provider, in
order, on one cluster: `plan` and `provisional` are pure, `up` is idempotent, `describe` matches
`up`, `connect` hands out its traits and its launcher's parts, `down` is idempotent and leaves
nothing. The optional parts (providers.base.ProviderParts) run per component: each part's tests
are parametrized over the backends that have it (PARTS), and every backend returns None for
every part it lacks.

Purity is observed, not assumed: an audit hook (sys.addaudithook) records every file opened for
writing, every socket connect and every subprocess while `plan` runs, and the providers get
credential and client factories that count their calls.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from orchestrator.clusters import spending
from orchestrator import backends
from orchestrator.providers import get_provider, parts
from orchestrator.providers.base import Provider, ProviderParts, SweepRequest
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError, PreflightError
from orchestrator.models import Cluster, ClusterState
from orchestrator.seams import Access, Launcher, LauncherParts, Traits

PROVIDERS = ("fake", "local", "ssh", "azure", "azureml")
ALL_PARTS = ("resizer", "expiry", "healer", "host_reports", "ownership", "live", "preflight")
# The optional parts each backend has (ProviderParts); every other part is None.
PARTS: dict[str, tuple[str, ...]] = {"fake": (), "local": ("resizer", "healer"), "ssh": (), "azure": ALL_PARTS,
                                     "azureml": ()}
# What each backend's clusters are (Traits), and the parts of the launcher `connect` hands out.
TRAITS = {"fake": Traits(shell=True, head_here=True), "local": Traits(shell=True, head_here=True, emulated_nodes=True),
          "ssh": Traits(shell=True), "azure": Traits(spends_money=True, shell=True), "azureml": Traits(spends_money=True)}
SLURM_PARTS = ("gate", "nodes", "staging", "checkpoints", "live_logs")
LAUNCHER_PARTS = {"fake": SLURM_PARTS, "local": SLURM_PARTS, "ssh": SLURM_PARTS, "azure": SLURM_PARTS,
                  "azureml": ()}


def test_the_suite_covers_every_registered_provider() -> None:
    assert set(PROVIDERS) == set(backends.names())


# -- observing purity ------------------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_EFFECTS = {"socket.connect", "socket.getaddrinfo", "subprocess.Popen", "os.system", "os.exec",
            "os.posix_spawn", "os.fork", "os.mkdir", "os.rename", "os.remove", "os.rmdir",
            "os.symlink", "os.link", "os.chmod", "os.truncate", "shutil.rmtree", "shutil.copyfile"}
_seen: list[tuple[str, tuple[Any, ...]]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _seen is None:
        return
    if event == "open":
        path, mode, flags = (list(args) + [None, None])[:3]
        if isinstance(path, int):
            return
        text = str(path)
        if text.endswith((".pyc", ".pyc.tmp")) or "__pycache__" in text:
            return  # a first import may cache bytecode: not the provider's doing
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE_FLAGS)
        _seen.append(("open-write" if writes else "open-read", (text,)))
    elif event in _EFFECTS:
        _seen.append((event, args))


sys.addaudithook(_audit)  # cannot be removed; it records only inside observe()


def observe(call: Callable[[], Any]) -> tuple[Any, list[tuple[str, tuple[Any, ...]]]]:
    """Run `call`; its result and the side effects the audit hook saw (files read included)."""
    global _seen
    _seen = []
    try:
        result = call()
    finally:
        seen, _seen = _seen, None
    return result, seen


def effects(seen: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    return [f"{event} {args[0] if args else ''}" for event, args in seen if event != "open-read"]


def credential_reads(seen: list[tuple[str, tuple[Any, ...]]], secrets: list[Path]) -> list[str]:
    dirs = [Path.home() / ".azure", Path.home() / ".ssh"]
    out = []
    for event, args in seen:
        if event == "open-read":
            path = Path(args[0])
            if path in secrets or any(path.is_relative_to(d) for d in dirs):
                out.append(str(path))
    return out


def test_the_purity_probe_sees_writes_connections_and_commands(tmp_path: Path) -> None:
    import subprocess
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def impure() -> int:
        (tmp_path / "written").write_text("x")
        socket.create_connection(server.getsockname(), timeout=5).close()
        return subprocess.run(["true"]).returncode

    try:
        result, seen = observe(impure)
    finally:
        server.close()
    kinds = [e.split()[0] for e in effects(seen)]
    assert result == 0 and {"open-write", "socket.connect", "subprocess.Popen"} <= set(kinds)
    def reads() -> bool:
        with open(__file__) as handle:
            return (Path.home() / ".ssh" / "id_nonexistent").exists() or bool(handle.read(1))

    _, seen = observe(reads)
    assert effects(seen) == [] and credential_reads(seen, [Path(__file__)]) == [__file__]


# -- one harness per provider ----------------------------------------------------------------

@dataclass
class Harness:
    """A provider, a spec for it and the probes the contract needs."""

    name: str
    make: Callable[[], Provider]  # a new instance, as a new azbench process would build it
    spec: ClusterSpec
    owned: Callable[[], set[str]]  # what the provider holds for the cluster right now
    requests: Callable[[], list[str]] = lambda: []  # requests its server saw so far ("PUT 201 path")
    credentials_used: Callable[[], int] = lambda: 0  # credentials/clients built or asked for a token
    secrets: list[Path] = field(default_factory=list)  # files `plan` must not read
    first: Cluster | None = None
    owned_after_first: set[str] = field(default_factory=set)
    provider: Provider = field(init=False)

    def __post_init__(self) -> None:
        self.provider = self.make()

    def up(self) -> Cluster:
        return self.provider.up(self.spec, self.provider.plan(self.spec))

    def cluster(self) -> Cluster:
        """The cluster of the first `up` (brought up on first use)."""
        if self.first is None:
            self.first = self.up()
            self.owned_after_first = self.owned()
        return self.first


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


def _fake(home: Path, request: pytest.FixtureRequest) -> Harness:
    spec = ClusterSpec(name="ctr-fake", provider="fake", sku="h100", nodes=2, region="eastus")
    return Harness("fake", lambda: get_provider("fake"), spec, lambda: _files(home / "clusters" / spec.name))


def _local(home: Path, request: pytest.FixtureRequest) -> Harness:
    from orchestrator.providers.local import proc
    from orchestrator.providers.local import provider as local
    from orchestrator.providers.local.cluster import STATE_FILE
    from orchestrator.slurm.commands import find_binaries
    from tests.fixtures.slurm import local_spec
    try:
        find_binaries()
    except PreflightError as exc:
        pytest.skip(str(exc))
    spec = local_spec("ctr-local", 1)
    cdir = home / "clusters" / spec.name

    def owned() -> set[str]:
        state = local.load_state(cdir)
        if state is None:
            return set()
        return {f"{key}:{d.pid}" for key, d in state.daemons.items()
                if proc.alive(d.pid, d.start_time)} | {STATE_FILE}

    return Harness("local", local.LocalProvider, spec, owned)


def _ssh(home: Path, request: pytest.FixtureRequest) -> Harness:
    from orchestrator.providers.ssh.provider import SshProvider
    from orchestrator.hosts.remote import SshRunner
    from orchestrator.providers.ssh.settings import SshSettings
    sshd = request.getfixturevalue("sshd")
    from tests.fixtures.slurm import wait_all_idle
    slurm = request.getfixturevalue("session_local_cluster")
    wait_all_idle(slurm)
    built: list[object] = []

    def factory(target: Any, env: dict[str, str]) -> Any:
        built.append(target)
        return SshRunner(target, env, connect_timeout=5)

    spec = ClusterSpec.model_validate(dict(name="ctr-ssh", provider="ssh", sku="local", nodes=2,
                       ssh=SshSettings(host=sshd.host, port=sshd.port, user=sshd.user,
                                      key_path=sshd.client_key, host_key=sshd.host_key_line,
                                      workdir=slurm.workdir, env=dict(slurm.env))))
    return Harness("ssh", lambda: SshProvider(factory), spec, lambda: _files(home / "clusters" / spec.name),
                   credentials_used=lambda: len(built), secrets=[Path(sshd.client_key)])


class _CountingCredential:
    def __init__(self) -> None:
        from testsupport.fake_arm import StubCredential
        self.inner, self.tokens = StubCredential(), 0

    def get_token(self, *scopes: str, **kw: Any) -> Any:
        self.tokens += 1
        return self.inner.get_token(*scopes, **kw)


def _arm_requests(server: Any) -> Callable[[], list[str]]:
    return lambda: [f"{e.method} {e.status} {e.path}" for e in list(server.log)]


def _azure(home: Path, request: pytest.FixtureRequest) -> Harness:
    from orchestrator.providers.azure.provider import AzureProvider
    from orchestrator.providers.azure.clients import AzureClients
    from testsupport.fake_arm import SUB, FakeArm, allow_plain_http_policy, default_catalogue
    server = FakeArm(polls_to_finish=1).start()
    request.addfinalizer(server.stop)
    default_catalogue(server)
    credential = _CountingCredential()
    clients = AzureClients(credential=credential, subscription_id=SUB, base_url=server.base_url,
                           per_call_policies=[allow_plain_http_policy()], polling_interval=0.01,
                           retry_backoff_factor=0.01)
    # boot_timeout_s 0: this fake does not boot VMs (tests/test_azure_e2e.py has the one that does)
    spec = ClusterSpec.model_validate(dict(name="ctr-azure", provider="azure", sku="h100", nodes=3, region="eastus",
                                           azure={"ssh_ingress_cidr": "203.0.113.7/32", "max_vms_per_scale_set": 2,
                                                  "boot_timeout_s": 0}))

    def owned() -> set[str]:
        with server.lock:
            return {k for k, r in server.resources.items()
                    if (r.get("tags") or {}).get("azbench-cluster") == spec.name}

    # join_timeout_s 0 likewise: replace_node and resize change ARM and wait for no Slurm join.
    return Harness("azure", lambda: AzureProvider(clients, capacity_wait_s=0, join_timeout_s=0),
                   spec, owned,
                   requests=_arm_requests(server), credentials_used=lambda: credential.tokens)


def _azureml(home: Path, request: pytest.FixtureRequest) -> Harness:
    from orchestrator.providers.azureml import provider as P
    from testsupport.fake_arm import default_catalogue
    from tests.test_azureml import FakeAml
    from tests.test_azureml import provider as aml_provider
    server = FakeAml()
    server.start()
    request.addfinalizer(server.stop)
    server.add_workspace()
    default_catalogue(server)
    server.set_quota(100_000)
    real = aml_provider(server)
    built: list[str] = []

    def ml(target: Any) -> Any:
        built.append("ml")
        return real.ml_client(target)

    def arm(target: Any) -> Any:
        built.append("arm")
        return real.arm_clients(target)

    spec = ClusterSpec.model_validate({
        "name": "ctr-aml", "provider": "azureml", "sku": "h100", "nodes": 2, "region": "eastus",
        "azureml": {"workspace": "ws1", "resource_group": "rg1", "subscription_id": server_sub()}})

    def owned() -> set[str]:
        return {name for name, r in server.of_type("workspaces/computes").items()
                if (r.get("tags") or {}).get("azbench-cluster") == spec.name}

    return Harness("azureml", lambda: P.AzureMLProvider(ml, arm, owner="tester"), spec, owned,
                   requests=_arm_requests(server), credentials_used=lambda: len(built))


def server_sub() -> str:
    from testsupport.fake_arm import SUB
    return SUB


_BUILDERS = {"fake": _fake, "local": _local, "ssh": _ssh, "azure": _azure, "azureml": _azureml}


def _param(name: str) -> Any:
    return pytest.param(name, marks=pytest.mark.integration) if name in ("local", "ssh") else name


def having(part: str) -> pytest.MarkDecorator:
    """The test runs on the backends that have `part` only (the module's `h`, overridden)."""
    return pytest.mark.parametrize("h", [_param(n) for n in PROVIDERS if part in PARTS[n]], indirect=True)


@pytest.fixture(scope="module", params=[_param(name) for name in PROVIDERS])
def h(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """One provider's harness, with its own $AZBENCH_HOME for the module; its cluster is brought
    down at the end whatever the tests did."""
    name = request.param
    home = tmp_path_factory.mktemp(f"ctr-{name}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZBENCH_HOME", str(home))
        patch.delenv("AZBENCH_DB_URL", raising=False)
        if name == "azureml":
            patch.setenv("AZUREML_CURRENT_CLOUD", "AzureCloud")  # MLClient sets it; restored after
            # describe/down NAME without the spec find the workspace as a user sets it up
            from orchestrator.providers.azureml.provider import GROUP_ENV, WORKSPACE_ENV
            patch.setenv("AZURE_SUBSCRIPTION_ID", server_sub())
            patch.setenv(WORKSPACE_ENV, "ws1")
            patch.setenv(GROUP_ENV, "rg1")
        harness = _BUILDERS[name](home, request)
        try:
            yield harness
        finally:
            if harness.first is not None:
                harness.provider.down(harness.first)


def _same_record(a: Cluster, b: Cluster) -> dict[str, tuple[Any, Any]]:
    """The fields where two records differ (created_at aside: the store keeps the first one)."""
    da, db = a.model_dump(exclude={"created_at"}), b.model_dump(exclude={"created_at"})
    return {k: (da.get(k), db.get(k)) for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)}


# -- the contract, in the order a cluster lives it -------------------------------------------

def test_the_parts_are_the_declared_ones_and_every_other_part_is_none(h: Harness) -> None:
    own = h.provider.parts()
    assert isinstance(own, ProviderParts)
    assert sorted(own.names()) == sorted(PARTS[h.name])
    absent = {f.name: getattr(own, f.name) for f in fields(own) if f.name in ALL_PARTS and f.name not in PARTS[h.name]}
    assert all(part is None for part in absent.values()), absent
    assert own.traits == TRAITS[h.name]
    assert sorted(parts(h.name).names()) == sorted(own.names())  # the facade builds the same
    assert h.provider.name == h.name


# Each operation of a part, by the part (providers.base._LACKS has the answer when it is absent).
OPERATIONS = {"resize": "resizer", "resize_preview": "resizer", "extend": "expiry", "sweep": "expiry",
              "replace_node": "healer", "restore_capacity": "healer", "report_unhealthy": "host_reports",
              "adopt": "ownership", "node_states": "live", "live_view": "live", "check": "preflight"}


@pytest.mark.parametrize(("backend", "operation"), [(n, op) for n in PROVIDERS for op, part in OPERATIONS.items()
                                                    if part not in PARTS[n]])
def test_an_absent_part_answers_one_line_exit_7(backend: str, operation: str) -> None:
    from orchestrator.providers.base import _LACKS, lacking
    assert set(OPERATIONS) == set(_LACKS)
    error = lacking("ctr-x", backend, operation)
    assert "\n" not in str(error) and str(error).startswith(f"cluster 'ctr-x' ({backend}) cannot ")
    assert error.exit_code == 7


def test_the_protocol_declares_at_most_eight_members() -> None:
    declared = {n for n in vars(Provider) if not n.startswith("_")} | set(Provider.__annotations__)
    assert declared == {"name", "plan", "provisional", "up", "describe", "down", "connect", "parts"}


def test_plan_is_pure(h: Harness) -> None:
    before_requests, before_owned = len(h.requests()), h.owned()
    state = dict(vars(h.provider))
    plan, seen = observe(lambda: h.provider.plan(h.spec))
    assert vars(h.provider) == state, "plan changed the provider (issue 37: describe takes the spec instead)"
    again = h.provider.plan(h.spec)
    assert effects(seen) == [], "plan wrote files, connected or ran a command"
    assert credential_reads(seen, h.secrets) == []
    assert h.credentials_used() == 0
    assert h.requests()[before_requests:] == []
    assert h.owned() == before_owned == set()
    assert again == plan
    assert (plan.cluster, plan.provider, plan.nodes) == (h.spec.name, h.name, h.spec.nodes)


def test_provisional_record_is_pure_and_has_the_plans_shape(h: Harness) -> None:
    plan = h.provider.plan(h.spec)
    record, seen = observe(lambda: h.provider.provisional(h.spec, plan))
    assert effects(seen) == [] and h.requests() == [] and h.credentials_used() == 0
    assert record.state is ClusterState.PROVISIONING
    assert (record.name, record.provider, record.sku, record.nodes, record.region) == \
        (h.spec.name, h.name, plan.sku, plan.nodes, plan.region)


def test_up_is_idempotent(h: Harness) -> None:
    first = h.cluster()
    assert first.state is ClusterState.READY and first.name == h.spec.name
    assert h.owned_after_first, "up created nothing the probe can see"
    mark = len(h.requests())
    again = h.up()
    created = [r for r in h.requests()[mark:] if not r.startswith("GET ")]
    assert created == [], "a second up sent requests that change the cloud"
    assert h.owned() == h.owned_after_first
    diff = _same_record(again, first)
    assert diff == {}, diff


def test_describe_matches_up(h: Harness) -> None:
    first = h.cluster()
    described = h.make().describe(h.spec.name)  # a new process: the cloud is the truth
    assert described is not None
    diff = _same_record(described, first)
    assert diff == {}, diff
    assert described.model_dump(include={"name", "sku", "nodes", "region", "state", "properties"}) == \
        first.model_dump(include={"name", "sku", "nodes", "region", "state", "properties"})


def test_describe_of_an_unknown_cluster_is_none(h: Harness) -> None:
    assert h.provider.describe("ctr-nosuch") is None


def test_connect_hands_out_the_traits_and_the_launchers_parts(h: Harness) -> None:
    cluster = h.cluster()
    access = h.provider.connect(cluster)
    try:
        assert isinstance(access, Access)
        assert access.traits == h.provider.parts().traits
        assert (access.shell is None) == (not access.traits.shell)
        launcher = access.launcher
        assert _protocol_members(Launcher) <= set(dir(launcher)), "launcher lacks protocol members"
        own = launcher.parts()
        assert isinstance(own, LauncherParts) and sorted(own.names()) == sorted(LAUNCHER_PARTS[h.name])
        if access.traits.head_here:  # the login shell is this machine: it sees our files
            marker = Path(os.environ["AZBENCH_HOME"]) / f"here-{os.getpid()}"
            marker.write_text("x")
            assert access.shell is not None
            assert access.shell.run(f"cat {marker}").stdout == "x"
            assert access.shell.run("hostname").stdout.strip() == socket.gethostname()
    finally:
        access.close()
        access.close()  # idempotent


def test_shell_of_a_shell_cluster_runs_commands(h: Harness) -> None:
    if h.name == "azure":
        pytest.skip("the fake ARM's VMs do not boot: tests/test_azure_e2e.py logs into booted ones")
    with h.provider.connect(h.cluster()) as access:
        if access.shell is None:
            pytest.skip(f"{h.name} has no login shell (checked above)")
        result = access.shell.run("echo contract; exit 3")
        assert (result.exit_code, result.stdout) == (3, "contract\n")


def test_spends_money_means_the_cost_cap_applies(h: Harness) -> None:
    plan = h.provider.plan(h.spec)
    tiny = 0.001
    if h.provider.parts().traits.spends_money:
        with pytest.raises(ConfigError, match="cap"):
            spending.check_cost_cap(plan, tiny)
    else:
        spending.check_cost_cap(plan, tiny)  # free (or someone else's) clusters are never capped


# -- the optional parts, each over the backends that have it -----------------------------------

@having("expiry")
def test_expiry_extend_moves_the_deadline_describe_shows(h: Harness) -> None:
    expiry = h.provider.parts().expiry
    assert expiry is not None
    cluster = h.cluster()
    when = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=5)
    expiry.extend(cluster, when)
    described = h.provider.describe(cluster.name)
    assert described is not None
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert stamp in described.model_dump_json(), "describe does not show the moved expiry"


@having("expiry")
def test_expiry_sweep_dry_run_keeps_a_live_cluster_and_writes_nothing(h: Harness) -> None:
    expiry = h.provider.parts().expiry
    assert expiry is not None
    cluster = h.cluster()
    mark = len(h.requests())
    items = expiry.sweep(SweepRequest(dry_run=True, known={cluster.name}))
    assert all(not i.deleted for i in items) and cluster.name not in {i.cluster for i in items if i.action == "delete"}
    assert [r for r in h.requests()[mark:] if not r.startswith(("GET ", "POST "))] == [], "a dry run wrote"
    assert h.owned() == h.owned_after_first


@having("live")
def test_live_node_states_list_the_nodes(h: Harness) -> None:
    live = h.provider.parts().live
    assert live is not None
    cluster = h.cluster()
    nodes = live.node_states(cluster)
    assert sorted(n["name"] for n in nodes) == sorted(cluster.node_names)
    assert all(n["state"] for n in nodes)


@having("live")
def test_live_view_and_overview_read_the_cluster_without_writing(h: Harness) -> None:
    live = h.provider.parts().live
    assert live is not None
    cluster = h.cluster()
    mark = len(h.requests())
    view = live.live_view(cluster)
    assert view.exists and view.instances == cluster.nodes and all(r.state for r in view.resources)
    listed = live.overview([cluster])
    assert listed[cluster.name].exists and not listed[cluster.name].phase, listed
    assert [r for r in h.requests()[mark:] if not r.startswith("GET ")] == [], "a status read wrote"


@having("ownership")
def test_ownership_the_creator_owns_it_holdings_are_ours_and_adopt_rebuilds_it(h: Harness) -> None:
    ownership = h.provider.parts().ownership
    assert ownership is not None
    cluster = h.cluster()
    mark = len(h.requests())
    assert ownership.foreign_owner(cluster) is None
    held = ownership.holdings(cluster)
    assert held and all(x.ours for x in held), held
    adopted = ownership.adopt(cluster.name)
    assert adopted is not None and (adopted.name, adopted.nodes, adopted.sku) == (cluster.name, cluster.nodes, cluster.sku)
    assert ownership.adopt("ctr-nosuch") is None
    assert [r for r in h.requests()[mark:] if not r.startswith(("GET ", "POST "))] == [], "ownership reads wrote"


@having("preflight")
def test_preflight_check_reads_and_finds_nothing_refusing_a_valid_plan(h: Harness) -> None:
    preflight = h.provider.parts().preflight
    assert preflight is not None
    mark = len(h.requests())
    checked, problems = preflight.check(h.spec, h.provider.plan(h.spec))
    assert checked and problems == [], (checked, problems)
    assert [r for r in h.requests()[mark:] if not r.startswith(("GET ", "POST "))] == [], "a check wrote"


@having("host_reports")
def test_host_reports_of_no_node_report_nothing_and_write_nothing(h: Harness) -> None:
    reports = h.provider.parts().host_reports
    assert reports is not None
    cluster = h.cluster()
    mark = len(h.requests())
    assert reports.report_unhealthy(cluster, {}) == []
    assert [r for r in h.requests()[mark:] if not r.startswith("GET ")] == []


@having("resizer")
def test_resizer_preview_says_what_a_grow_changes_and_changes_nothing(h: Harness) -> None:
    resizer = h.provider.parts().resizer
    assert resizer is not None
    cluster = h.cluster()
    mark = len(h.requests())
    assert resizer.resize_preview(cluster, len(cluster.node_names)) == []
    grow = resizer.resize_preview(cluster, len(cluster.node_names) + 1)
    assert sum(c.after - c.now for c in grow) == 1, grow
    assert [r for r in h.requests()[mark:] if not r.startswith("GET ")] == [], "a preview wrote"
    assert h.owned() == h.owned_after_first


@having("healer")
def test_healer_restore_capacity_with_nothing_evicted_changes_nothing(h: Harness) -> None:
    healer = h.provider.parts().healer
    assert healer is not None
    cluster = h.cluster()
    mark = len(h.requests())
    hosts = healer.restore_capacity(cluster, (), timeout_s=30)
    assert sorted(hosts) == sorted(cluster.node_names)
    changes = [r for r in h.requests()[mark:] if not r.startswith("GET ")]
    assert changes == [], "nothing was evicted, yet restore changed the cluster"
    assert h.owned() == h.owned_after_first


@having("healer")
def test_healer_replace_node_brings_a_fresh_one_under_a_new_name(h: Harness) -> None:
    healer = h.provider.parts().healer
    assert healer is not None
    cluster = h.cluster()
    old = cluster.node_names[-1]
    new = healer.replace_node(cluster, old)
    described = h.provider.describe(cluster.name)
    assert described is not None and new not in cluster.node_names
    assert sorted(described.node_names) == sorted([*cluster.node_names[:-1], new])
    h.first = described  # later tests (and the fixture's down) see the cluster as it now is


def test_down_is_idempotent_and_leaves_nothing(h: Harness) -> None:
    cluster = h.cluster()
    h.provider.down(cluster)
    assert h.owned() == set()
    assert h.provider.describe(cluster.name) is None
    h.provider.down(cluster)  # missing is success
    assert h.owned() == set()
    assert h.provider.describe(cluster.name) is None
    h.first = None  # nothing for the fixture to bring down


# -- helpers ---------------------------------------------------------------------------------

def _protocol_members(proto: type) -> set[str]:
    return {n for n in vars(proto) if not n.startswith("_")} | set(getattr(proto, "__annotations__", {}))
