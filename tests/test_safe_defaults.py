"""Safe defaults (issue 21 point 7): an SSH source range wider than /16 (IPv4) or /48 (IPv6) is
refused unless azure.allow_wide_ssh_ingress, which `up` still asks about; every OS disk, NIC and
public IP is deleted with its VM; the store's database file is the owner's alone (0600)."""

from __future__ import annotations

import os
import stat

import pytest

from orchestrator.specs.cluster import ClusterSpec, load_cluster_spec
from orchestrator.providers.azure.settings import AzureSettings, wide_ingress_question
from orchestrator.errors import ConfigError


def _azure(**azure) -> ClusterSpec:
    return ClusterSpec(name="sd", provider="azure", sku="h100", nodes=1, region="eastus", azure=azure)


@pytest.mark.parametrize("cidr", ["0.0.0.0/1", "10.0.0.0/15", "2001:db8::/47", "::/1"])
def test_a_wide_ssh_range_is_refused_with_file_and_line(tmp_path, cidr):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: sd\nprovider: azure\nsku: h100\nnodes: 1\nregion: eastus\n"
                    f"azure:\n  ssh_ingress_cidr: '{cidr}'\n")
    with pytest.raises(ConfigError) as err:
        load_cluster_spec(path)
    text = str(err.value)
    assert text.startswith(f"{path}:7: azure.ssh_ingress_cidr: ") and "allow_wide_ssh_ingress" in text
    assert "\n" not in text


@pytest.mark.parametrize("cidr", ["203.0.113.7/32", "10.1.0.0/16", "2001:db8:1::/48", "2001:db8::1/128"])
def test_ranges_up_to_the_limit_pass_and_ask_nothing(cidr):
    spec = _azure(ssh_ingress_cidr=cidr)
    assert spec.section(AzureSettings).ssh_ingress_cidr is not None and wide_ingress_question(spec.section(AzureSettings)) is None


def test_the_allow_flag_accepts_a_wide_range_and_up_asks_about_it(tmp_path, monkeypatch, azbench_home):
    import typer
    from typer.testing import CliRunner

    from orchestrator.cli import app, clusters as cli
    from orchestrator.clusters import lifecycle
    spec = _azure(ssh_ingress_cidr="10.0.0.0/8", allow_wide_ssh_ingress=True)
    assert wide_ingress_question(spec.section(AzureSettings)) == "Open SSH (port 22) on the head to 10.0.0.0/8 (16,777,216 addresses)?"
    asked: list[tuple[str, bool]] = []

    def confirm(question: str, yes: bool) -> None:
        asked.append((question, yes))
        if question.startswith("Open SSH") and not yes:
            raise typer.Abort()
    monkeypatch.setattr(cli, "confirm", confirm)
    monkeypatch.setattr(lifecycle, "up", lambda *a, **k: pytest.fail("up ran without the answer"))
    path = tmp_path / "c.yaml"
    path.write_text("name: sd\nprovider: azure\nsku: h100\nnodes: 1\nregion: eastus\n"
                    "azure: {ssh_ingress_cidr: 10.0.0.0/8, allow_wide_ssh_ingress: true}\n")
    result = CliRunner().invoke(app.app, ["up", "-f", str(path)])
    assert result.exit_code != 0 and [q for q, _ in asked][-1].startswith("Open SSH (port 22) on the head to 10.0.0.0/8")
    assert len(asked) == 2  # the spending question first, then the SSH range


def test_every_disk_nic_and_public_ip_is_deleted_with_its_vm(fake, clients, azbench_home):
    from orchestrator.providers.azure.provider import AzureProvider
    spec = ClusterSpec(name="dl", provider="azure", sku="h100", nodes=2, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0})
    p = AzureProvider(clients, capacity_wait_s=0)
    p.up(spec, p.plan(spec))
    head = fake.of_type("virtualMachines")["dl-head"]["properties"]
    assert head["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert [n["properties"]["deleteOption"] for n in head["networkProfile"]["networkInterfaces"]] == ["Delete"]
    assert fake.of_type("publicIPAddresses")["dl-head-ip"]["properties"]["deleteOption"] == "Delete"
    for vmss in fake.of_type("virtualMachineScaleSets").values():
        prof = vmss["properties"]["virtualMachineProfile"]
        assert prof["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
        assert {n["properties"]["deleteOption"] for n in prof["networkProfile"]["networkInterfaceConfigurations"]} == {"Delete"}


def test_the_store_is_created_0600_and_an_old_0644_one_is_tightened(azbench_home):
    from orchestrator.store.database import Store
    db = azbench_home / "azbench.db"
    with Store.open():
        pass
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    db.chmod(0o644)
    wal = azbench_home / "azbench.db-wal"
    if wal.exists():
        wal.chmod(0o644)
    with Store.open() as store:
        store.list_clusters()
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    for extra in (azbench_home / "azbench.db-wal", azbench_home / "azbench.db-shm"):
        if extra.exists():
            assert stat.S_IMODE(os.stat(extra).st_mode) & 0o077 == 0
