"""A new backend is one folder and one registry line: the test-only toy backend (tests/toy_backend/)
registered at run time, then carried by the real code paths with no line of orchestrator/ naming it.

Registered, "toy" is a provider a cluster spec may name, its `toy:` section is validated by its own
settings model (errors keep the file's line and the section's key), `azbench up/status/down` run
it through the real CLI (in this process, so the registration is visible), its Cluster record
round-trips through the store with its own props, and the layout rules count "toy" as a provider
name and tests.toy_backend as a backend. Unregistered, all of that is gone again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import backends
from orchestrator.errors import ConfigError
from orchestrator.models import Cluster, ClusterState
from orchestrator.specs.cluster import load_cluster_spec
from tests import test_layout as layout
from tests.cli_helpers import azbench_in_process
from tests.toy_backend.props import ToyProps
from tests.toy_backend.settings import ToySettings

TOY_DIR = Path(__file__).parent / "toy_backend"


@pytest.fixture
def toy() -> Iterator[str]:
    backends.register("toy", "tests.toy_backend")
    try:
        yield "toy"
    finally:
        backends.unregister("toy")


def _spec_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(body)
    return path


SPEC = "name: toys\nprovider: toy\nnodes: 2\ntoy:\n  slots: 4\n  colour: blue\n"


# -- the spec ---------------------------------------------------------------------------------------

def test_a_spec_names_the_toy_and_its_section_validates_through_its_settings(toy: str, tmp_path: Path) -> None:
    spec = load_cluster_spec(_spec_file(tmp_path, SPEC))
    assert spec.provider == "toy" and spec.sku == backends.LOCAL_SKU  # sku_required=False
    assert spec.section(ToySettings) == ToySettings(slots=4, colour="blue")
    assert spec.own_section() == ToySettings(slots=4, colour="blue")
    assert json.loads(spec.model_dump_json())["toy"] == {"slots": 4, "colour": "blue"}  # dumps as users write it
    defaults = load_cluster_spec(_spec_file(tmp_path, "name: toys\nprovider: toy\nnodes: 1\n"))
    assert defaults.own_section() == ToySettings()


@pytest.mark.parametrize(("section", "message"), [
    ("toy:\n  slots: 99\n", r"cluster\.yaml:5: toy\.slots: .*less than or equal to 8"),
    ("toy:\n  colour: green\n", r"cluster\.yaml:5: toy\.colour: .*'red' or 'blue'"),
    ("toy:\n  shape: round\n", r"cluster\.yaml:5: unknown key 'toy\.shape'"),
])
def test_a_bad_toy_section_names_its_key_and_line(toy: str, tmp_path: Path, section: str, message: str) -> None:
    path = _spec_file(tmp_path, "name: toys\nprovider: toy\nnodes: 2\n" + section)
    with pytest.raises(ConfigError, match=message):
        load_cluster_spec(path)


def test_unregistered_the_toy_is_no_provider(tmp_path: Path) -> None:
    assert "toy" not in backends.names()
    with pytest.raises(ConfigError, match="unknown provider 'toy'"):
        load_cluster_spec(_spec_file(tmp_path, "name: toys\nprovider: toy\nnodes: 1\n"))
    with pytest.raises(ConfigError, match=r"cluster\.yaml:3: unknown key 'toy'"):
        load_cluster_spec(_spec_file(tmp_path, "name: toys\nnodes: 1\ntoy:\n  slots: 2\n"))


# -- the CLI ----------------------------------------------------------------------------------------

def test_up_status_down_run_the_toy_through_the_real_cli(toy: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    up = azbench_in_process("up", "--provider", "toy", "--name", "toys", "--nodes", "2", "--json", home=home)
    assert up.code == 0, up.err
    made = json.loads(up.out)
    assert made["cluster"]["provider"] == "toy" and made["cluster"]["state"] == "ready"
    assert made["cluster"]["properties"] == {"kind": "toy", "slots": 1, "colour": "red"}
    assert made["plan"]["resources"][0]["kind"] == "toy/node" and made["adopted"] is False

    again = azbench_in_process("up", "--provider", "toy", "--name", "toys", "--nodes", "2", "--json", home=home)
    assert again.code == 0 and json.loads(again.out)["adopted"] is True  # describe() found it

    listed = azbench_in_process("status", "--json", home=home)
    assert listed.code == 0, listed.err
    assert [(c["name"], c["provider"], c["state"]) for c in json.loads(listed.out)["clusters"]] == [
        ("toys", "toy", "ready")]
    one = azbench_in_process("status", "toys", "--json", home=home)
    assert one.code == 0, one.err
    shown = json.loads(one.out)
    assert [n["name"] for n in shown["nodes"]] == ["toys-toy0", "toys-toy1"]  # through connect's launcher
    assert shown["head"] == "" and shown["cloud"] is None  # no live_node_states: no cloud view

    down = azbench_in_process("down", "toys", home=home)
    assert down.code == 0, down.err
    assert "cluster 'toys' is down" in down.out
    assert not (home / "clusters" / "toys" / "toy.json").exists()
    after = json.loads(azbench_in_process("status", "--json", home=home).out)
    assert [c["state"] for c in after["clusters"]] == ["terminated"]


def test_up_from_a_spec_file_records_the_toy_section(toy: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    up = azbench_in_process("up", "-f", str(_spec_file(tmp_path, SPEC)), "--json", home=home)
    assert up.code == 0, up.err
    assert json.loads(up.out)["cluster"]["properties"] == {"kind": "toy", "slots": 4, "colour": "blue"}
    bad = azbench_in_process("up", "-f", str(_spec_file(tmp_path, SPEC.replace("4", "0"))), home=home)
    assert bad.code != 0 and "cluster.yaml:5: toy.slots:" in bad.err


# -- the store --------------------------------------------------------------------------------------

def test_the_toy_record_round_trips_through_the_store(toy: str, tmp_path: Path) -> None:
    from orchestrator.store.database import Store
    cluster = Cluster(name="toys", provider="toy", sku=backends.LOCAL_SKU, nodes=2, state=ClusterState.READY,
                      node_names=["toys-toy0", "toys-toy1"], properties=ToyProps(slots=3, colour="blue"))
    with Store.open(f"sqlite:///{tmp_path / 'azbench.db'}") as store:
        store.save_cluster(cluster)
        row = store.get_cluster("toys")
    assert row is not None and row.cluster == cluster
    assert row.cluster.properties_as(ToyProps).slots == 3
    # From JSON, `kind` picks the toy's props model through the registry.
    assert Cluster.model_validate_json(cluster.model_dump_json()).properties == ToyProps(slots=3, colour="blue")


# -- one folder, one line ----------------------------------------------------------------------------

def test_the_layout_rules_count_the_toy_once_registered() -> None:
    compares = 'def f(cluster):\n    return cluster.provider == "toy"\n'
    imports = "from tests.toy_backend import provider\n"
    module = "orchestrator.clusters.lifecycle"
    assert layout.caught(layout.provider_name_violations, module, compares) == []
    assert layout.caught(layout.backend_import_violations, module, imports) == []
    backends.register("toy", "tests.toy_backend")
    try:
        assert layout.backend_packages()["toy"] == "tests.toy_backend"
        assert [v.split(": ", 1)[1] for v in layout.caught(layout.provider_name_violations, module, compares)] == [
            "provider name compared"]
        found = layout.caught(layout.backend_import_violations, module, imports)
        assert len(found) == 1 and "imports backend 'toy' (tests.toy_backend" in found[0]
    finally:
        backends.unregister("toy")


def test_the_toy_is_one_folder_and_orchestrator_never_names_it() -> None:
    assert sorted(p.name for p in TOY_DIR.glob("*.py")) == [
        "__init__.py", "launcher.py", "props.py", "provider.py", "settings.py"]
    named = [f"{p.relative_to(layout.ROOT)}:{i}" for p in layout.PKG.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\btoy(\b|_backend)", line, re.I)]
    assert named == []
