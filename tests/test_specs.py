"""Spec loading: defaults, flag overrides, and one precise line for every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.providers.local.settings import LocalSettings
from orchestrator.specs.cluster import load_cluster_spec
from orchestrator.specs.run import load_run_spec, parse_node_list
from orchestrator.specs.values import parse_duration
from orchestrator.errors import ConfigError, NotFoundError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_flags_override_file(tmp_path):
    path = write(tmp_path, "name: one\nprovider: azure\nsku: h100\nnodes: 2\nregion: eastus\n")
    spec = load_cluster_spec(path, {"nodes": 8, "sku": "nd-h200-v5", "region": None})
    assert (spec.nodes, spec.sku, spec.region) == (8, "Standard_ND96isr_H200_v5", "eastus")


def test_local_defaults_to_local_cpu_sku():
    spec = load_cluster_spec(None, {"name": "local", "nodes": 4})
    assert spec.provider == "local" and spec.sku == "Local_CPU" and spec.section(LocalSettings).slurmd_timeout == 10


@pytest.mark.parametrize("text, expected", [
    ("name: a\nnodes: 2\nbogus: 1\n", "cluster.yaml:3: unknown key 'bogus'"),
    ("name: a\nnodes: 2\nazure:\n  vnet_cidr: 10.1.0.0/16\n  colour: red\n",
     "cluster.yaml:5: unknown key 'azure.colour'"),
    ("name: a\nnodes: 2.5\n", "cluster.yaml:2: nodes: Input should be a valid integer"),
    ("name: a\nnodes: 0\n", "cluster.yaml:2: nodes: must be between 1 and 100000, got 0"),
    ("name: a\nnodes: -3\n", "cluster.yaml:2: nodes: must be between 1 and 100000, got -3"),
    ("name: a\nnodes: [1\n", "malformed YAML"),
    ("name: a\nnodes: 1\nazure:\n  vnet_cidr: 172.16.4.0/24\n", "cluster.yaml:4: azure.vnet_cidr: "
     "172.16.4.0/24 overlaps 172.16.0.0/16"),
    ("- just\n- a list\n", "cluster.yaml:1: expected a mapping"),
    ("name: Bad_Name\nnodes: 1\n", "cluster.yaml:1: name: String should match pattern"),
])
def test_bad_yaml_names_file_line_and_key(tmp_path, text, expected):
    with pytest.raises(ConfigError) as info:
        load_cluster_spec(write(tmp_path, text))
    assert expected in str(info.value)


def test_unknown_sku_suggests_alias():
    with pytest.raises(NotFoundError, match=r"unknown SKU 'h1000'.*did you mean"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "provider": "azure", "sku": "h1000",
                                 "region": "eastus"})


def test_region_typo_suggests_region():
    with pytest.raises(ConfigError, match=r"unknown region 'eastuss'.*'eastus'"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "provider": "azure", "sku": "h100",
                                 "region": "eastuss"})


def test_flag_errors_name_the_flag():
    with pytest.raises(ConfigError, match=r"^--nodes: must be between 1 and 100000, got 0$"):
        load_cluster_spec(None, {"name": "a", "nodes": 0})


def test_provider_rules():
    with pytest.raises(ConfigError, match="region is required for provider 'azure'"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "provider": "azure", "sku": "h100"})
    with pytest.raises(ConfigError, match="sku is required"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "provider": "azure", "region": "eastus"})
    with pytest.raises(ConfigError, match="local provider emulates CPU nodes"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "sku": "h100"})
    with pytest.raises(ConfigError, match="needs an 'ssh:' section"):
        load_cluster_spec(None, {"name": "a", "nodes": 1, "provider": "ssh"})


def test_run_spec_durations_and_nodes(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("recipe: smoke\nnodes: [1, 2, 4]\nretry:\n  hang_timeout: 90s\n  max_duration: 2h\n")
    spec = load_run_spec(path)
    assert spec.nodes == [1, 2, 4] and spec.retry.hang_timeout == 90
    assert spec.retry.max_duration == 7200 and spec.retry.resume == "checkpoint"
    path.write_text("recipe: smoke\nretry:\n  hang_timeout: soon\n")
    with pytest.raises(ConfigError, match=r"run.yaml:3: retry.hang_timeout: 'soon' is not a duration"):
        load_run_spec(path)


def test_parse_duration_and_node_list():
    assert [parse_duration(v) for v in (5, "30s", "10m", "1.5h", "1d")] == [5, 30, 600, 5400, 86400]
    assert parse_node_list("1, 2,4") == [1, 2, 4]
    for bad in ("1,x", "0", "2,-1", "1.5"):
        with pytest.raises(ConfigError, match="^--nodes: "):
            parse_node_list(bad)


def test_a_spec_error_names_every_wrong_field_with_its_line(tmp_path):
    """Issue 38: `nodes: "four"` and `local: [1, 2]` (a backend's section, validated first) both
    named, each with its file:line, in file order, on one line."""
    path = write(tmp_path, 'name: t1\nprovider: local\nnodes: "four"\nlocal: [1, 2]\n')
    with pytest.raises(ConfigError) as info:
        load_cluster_spec(path)
    problems = str(info.value).split("; ")
    assert [p.split(": ")[0].rsplit("/", 1)[-1] for p in problems] == ["cluster.yaml:3", "cluster.yaml:4"]
    assert "nodes: Input should be a valid integer" in problems[0]
    assert "local: Input should be a valid dictionary" in problems[1] and "\n" not in str(info.value)
    three = write(tmp_path, "name: t1\nprovider: azure\nsku: h100\nnodes: 0\nregion: eastus\n"
                            "colour: red\nazure:\n  vnet_cidr: 172.16.4.0/24\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_spec(three)
    text = str(info.value)
    assert text.index("cluster.yaml:4: nodes: must be between 1 and 100000, got 0") < \
        text.index("cluster.yaml:6: unknown key 'colour'") < text.index("cluster.yaml:8: azure.vnet_cidr: ")


def test_a_run_spec_error_names_every_wrong_field(tmp_path):
    from orchestrator.specs.run import load_run_spec
    path = tmp_path / "run.yaml"
    path.write_text("recipe: smoke\ncluster: c\nrepeats: many\nnodes: [1, x]\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        load_run_spec(path)
    lines = [p.split(": ")[0].rsplit(":", 1)[-1] for p in str(info.value).split("; ")]
    assert lines == ["3", "4", "5"], str(info.value)
