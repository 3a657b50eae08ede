"""A resize that finishes or rolls back (issue 48, point 3), at the fake ARM: a shrink parks VMs
with deallocate and a grow starts them again; when deallocate fails the instances are deleted
instead (and the event says so); when that fails too, the nodes the shrink drained are returned
to service and the error says so: no node stays drained and billing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator.clusters import lifecycle
from orchestrator.errors import ProvisionError
from orchestrator.providers.azure.provider import AzureProvider
from orchestrator.seams import Access, Capabilities
from orchestrator.store.database import Store
from tests.test_azure_grow import spec_for
from tests.test_azure_lifecycle import wired  # noqa: F401 (a fixture)


class FakeSlurm:
    """The launcher calls a resize makes: node states, drain, resume; what stays drained."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.drained: set[str] = set()
        self.calls: list[str] = []

    def node_states(self) -> dict[str, Any]:
        return {n: SimpleNamespace(state="drained" if n in self.drained else "idle") for n in self.nodes}

    def drain(self, reasons: dict[str, str]) -> list[str]:
        self.calls.append(f"drain {','.join(sorted(reasons))}")
        self.drained |= set(reasons)
        return list(reasons)

    def resume(self, nodes: list[str]) -> None:
        self.calls.append(f"resume {','.join(sorted(nodes))}")
        self.drained -= set(nodes)


@pytest.fixture
def slurm(wired: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeSlurm]:  # noqa: F811
    box: dict[str, FakeSlurm] = {}

    def connect(self: AzureProvider, cluster: Any) -> Access:
        launcher = box.setdefault("s", FakeSlurm(list(cluster.node_names)))
        return Access(launcher=launcher, shell=None, caps=Capabilities())  # type: ignore[arg-type]
    monkeypatch.setattr(AzureProvider, "connect", connect)
    return box


def _up(name: str, nodes: int) -> None:
    with Store.open() as store:
        lifecycle.up(spec_for(name, "h100", nodes), store)


def _events(name: str) -> list[tuple[str, str]]:
    with Store.open() as store:
        return [(e.kind, e.message) for e in store.list_events(cluster=name)]


def test_a_shrink_and_a_grow_back_succeed(fake: Any, slurm: dict[str, FakeSlurm]) -> None:
    _up("rs", 4)
    with Store.open() as store:
        shrunk, plan = lifecycle.resize("rs", 2, store)
    assert shrunk.nodes == 2 and len(plan.remove) == 2
    assert fake.count("POST", "/deallocate") == 1 and fake.count("POST", "/delete") == 0
    with Store.open() as store:
        grown, _ = lifecycle.resize("rs", 4, store)
    assert grown.nodes == 4 and fake.count("POST", "/start") == 1
    assert slurm["s"].drained == set(plan.remove)  # parked: drained, as Slurm sees a removed node


def test_a_failed_park_deletes_the_instances_instead_and_says_so(fake: Any, slurm: dict[str, FakeSlurm]) -> None:
    _up("rp", 4)
    fake.add_fault("error500", method="POST", path_contains="/deallocate", times=100)
    with Store.open() as store:
        shrunk, plan = lifecycle.resize("rp", 2, store)
    assert shrunk.nodes == 2
    assert fake.count("POST", "/delete") == 1  # the instances are gone: nothing bills
    notes = [m for k, m in _events("rp") if k == "resize_note"]
    assert len(notes) == 1 and "deleted them instead" in notes[0] and "failed" in notes[0]


def test_when_neither_park_nor_delete_works_no_node_stays_drained(fake: Any, slurm: dict[str, FakeSlurm]) -> None:
    _up("rn", 4)
    fake.add_fault("error500", method="POST", path_contains="/deallocate", times=100)
    fake.add_fault("error500", method="POST", path_contains="/delete", times=100)
    with Store.open() as store:
        with pytest.raises(ProvisionError) as err:
            lifecycle.resize("rn", 2, store)
    message = str(err.value)
    assert "left" in message and "returned to service (undrained)" in message, message
    launcher = slurm["s"]
    assert launcher.calls[0].startswith("drain ") and launcher.calls[-1].startswith("resume ")
    assert launcher.drained == set()  # none left drained while it bills
    failed = [m for k, m in _events("rn") if "resize" in k]
    assert failed and "undrained" in failed[-1]
