"""GB200 racks by NVLink domain (issue 30, point 6): each node reports its GPU fabric's cluster
UUID and clique ID at boot (`nvidia-smi -q`), and templates/nvlink_topology.py (the head's
azbench-topology) builds the Slurm racks from those, falling back to the scale set's instance
order, with a warning, for a node that reports nothing. The emulated boot runs the real
cloud-init script against the emulator's nvidia-smi."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from orchestrator.hardware.catalog import lookup
from orchestrator.hardware.layout import default_vms_per_rack, scale_set_layout
from orchestrator.models import ScaleSetPlan
from orchestrator.paths import templates_dir
from orchestrator.providers.azure import cloudinit as ci
from orchestrator.recipes.catalog import resolve
from testsupport.vm_emulator import can_emulate

GB200 = lookup("gb200")
TOOL = templates_dir() / "nvlink_topology.py"


def _tool():
    spec = importlib.util.spec_from_file_location("nvlink_topology", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(sets: list[ScaleSetPlan], version: tuple[int, int] | None = (23, 11)) -> dict:
    fake = ci.ClusterSecrets(Path("/x"), "k", "h", "H", "m")
    text = ci.head_cloud_init("c", GB200, sets, "10.0.0.4", "10.0.0.0/16", fake, slurm_version=version)
    files = {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}
    return json.loads(files["/etc/azbench/topology.json"])


def test_the_tool_knows_the_plans_racks_as_the_provider_does() -> None:
    sets = [ScaleSetPlan(name=f"big-gpu-{i:02d}", vms=96, gpus=384, racks=6) for i in range(21)]
    sets.append(ScaleSetPlan(name="big-gpu-21", vms=32, gpus=128, racks=2))
    assert _tool().plan_racks(_config(sets)) == ci.nvlink_racks(GB200, sets)


def test_racks_follow_the_reported_domains_not_the_instance_order(tmp_path: Path) -> None:
    sets = [ScaleSetPlan(name="c-gpu-00", vms=32, gpus=128, racks=2)]
    plan = ci.nvlink_racks(GB200, sets)
    hosts = plan["c-gpu-00-rack0"] + plan["c-gpu-00-rack1"]
    reports = tmp_path / "hosts"
    reports.mkdir()
    for i, host in enumerate(hosts):  # Azure put the even instances in one NVL72, the odd in another
        text = "unknown" if i == 5 else f"{'aaaa1111' if i % 2 else 'bbbb2222'}-0000-4000-8000-000000000000 {i % 2}"
        (reports / f"{host}.nvlink").write_text(text + "\n")
    config = tmp_path / "topology.json"
    config.write_text(json.dumps(_config(sets)))
    out = tmp_path / "topology.conf"
    done = subprocess.run([sys.executable, str(TOOL), str(config), str(reports), str(out)],
                          capture_output=True, text=True, check=True)
    assert "31 node(s) placed by NVLink domain, 1 by instance order" in done.stdout
    blocks = {line.split()[0][len("BlockName="):]: line.split("Nodes=")[1].split(",")
              for line in out.read_text().splitlines() if line.startswith("BlockName=")}
    assert blocks["nvl-bbbb2222-0"] == [h for i, h in enumerate(hosts) if i % 2 == 0 and i != 5]
    assert blocks["nvl-aaaa1111-1"] == [h for i, h in enumerate(hosts) if i % 2 == 1 and i != 5]
    assert blocks["c-gpu-00-rack0"] == [hosts[5]]  # reported nothing: its instance-order rack
    assert f"# warning: 1 node(s) reported no NVLink domain, placed by scale-set instance order: {hosts[5]}" \
        in out.read_text()
    assert any(name.startswith("c-gpu-00-spare") for name in blocks)  # FUTURE slots stay placed


def _node_script() -> str:
    sets = [ScaleSetPlan(name="c-gpu-00", vms=2, gpus=8, racks=1)]
    fake = ci.ClusterSecrets(Path("/x"), "k", "h", "H", "m")
    text = ci.node_cloud_init("c", GB200, sets, "10.0.0.4", fake)
    files = {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}
    return files["/usr/local/sbin/azbench-nvlink-domain"]


def test_the_node_script_reads_clusteruuid_and_cliqueid_from_nvidia_smi(tmp_path: Path) -> None:
    """The cloud-init script, with /shared moved under tmp and nvidia-smi, hostname, scontrol
    and flock's command stubbed; the nvidia-smi output is the emulator's (testsupport/vm_shim.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = (Path(__file__).resolve().parents[1] / "testsupport" / "vm_shim.py").read_text()
    body = shim[shim.index("def nvidia_smi"):shim.index("def _resolve")]
    fake_smi = ("import sys\ndef vm():\n    return {'nvlink': ['3f1c9e2a-aaaa-4bbb-8ccc-0123456789ab', 32766]}\n"
                "def die(m, c):\n    print(m, file=sys.stderr); sys.exit(c)\n" + body + "nvidia_smi(sys.argv[1:])\n")
    (bin_dir / "nvidia-smi.py").write_text(fake_smi)
    for name, text in (("nvidia-smi", f'#!/bin/sh\nexec {sys.executable} {bin_dir}/nvidia-smi.py "$@"\n'),
                       ("hostname", "#!/bin/sh\necho c-gpu-00-000001\n"),
                       ("scontrol", "#!/bin/sh\necho \"scontrol $*\" >>\"$SHARED/scontrol.log\"\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    shared = tmp_path / "shared"
    (shared / "azbench" / "bin").mkdir(parents=True)
    (shared / "slurm").mkdir()
    (shared / "azbench" / "bin" / "azbench-topology").write_text(f"#!{sys.executable}\n" + TOOL.read_text())
    (shared / "azbench" / "bin" / "azbench-topology").chmod(0o755)
    (shared / "azbench" / "topology.json").write_text(json.dumps(
        _config([ScaleSetPlan(name="c-gpu-00", vms=2, gpus=8, racks=1)])))
    script = tmp_path / "report.sh"
    script.write_text(_node_script().replace("/shared/", f"{shared}/"))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SHARED": str(shared)}
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    report = shared / "azbench" / "hosts" / "c-gpu-00-000001.nvlink"
    assert report.read_text() == "3f1c9e2a-aaaa-4bbb-8ccc-0123456789ab 32766\n"
    assert "BlockName=nvl-3f1c9e2a-32766 Nodes=c-gpu-00-000001" in (shared / "slurm" / "topology.conf").read_text()
    assert (shared / "scontrol.log").read_text() == "scontrol reconfigure\n"


def test_published_two_and_four_node_gb200_scales_plan_without_extra_settings() -> None:
    for nodes in (2, 4):
        sets, _ = scale_set_layout("c", nodes, GB200)
        assert [(s.vms, s.racks) for s in sets] == [(nodes, 1)]  # one partial rack
    assert default_vms_per_rack(128, GB200) == 16 and default_vms_per_rack(36, GB200) == 18
    note = resolve("llama31_405b", "gb200", 128).placement.notes[-1]  # type: ignore[union-attr]
    assert "1 per 16-VM rack (0 VM(s) per rack left idle): 8 rack(s) of the 18 an NVL72 rack holds" in note


needs_vms = pytest.mark.skipif(can_emulate() is not None, reason=can_emulate() or "")


@pytest.mark.integration
@needs_vms
def test_an_emulated_gb200_node_reports_its_nvlink_domain_at_boot(tmp_path: Path) -> None:
    """Two emulated VMs boot the rendered report script with the emulator's nvidia-smi: one in a
    fabric domain, one without GPUs; their reports build the racks."""
    from testsupport.vm_emulator import Fabric, VmSpec
    fabric = Fabric(tmp_path / "fabric")
    fabric.nvlink["gb-0"] = ("5e0c7a11-1111-4222-8333-444455556666", 3)
    config = _config([ScaleSetPlan(name="c-gpu-00", vms=2, gpus=8, racks=1)])
    user_data = {"write_files": [
        {"path": "/usr/local/sbin/azbench-nvlink-domain", "permissions": "0755", "content": _node_script()},
        {"path": "/shared/azbench/bin/azbench-topology", "permissions": "0755", "content": TOOL.read_text()},
        {"path": "/shared/azbench/topology.json", "content": json.dumps(config)}],
        "runcmd": [["mkdir", "-p", "/shared/slurm"],
                   ["sh", "-c", "/usr/local/sbin/azbench-nvlink-domain; true"]]}
    data = base64.b64encode(gzip.compress(("#cloud-config\n" + yaml.safe_dump(user_data)).encode())).decode()
    try:
        for i, name in enumerate(("gb-0", "gb-1")):
            fabric.boot(VmSpec(name=name, hostname=f"c-gpu-00-00000{i}", private_ip=f"10.9.0.{10 + i}",
                               prefix_len=24, public_ip=None, custom_data=data, admin_user="azureuser",
                               ssh_keys=[], size="Standard_ND128isr_NDR_GB200_v6", vcpus=4))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not all(fabric.boot_state(n).get("stage") == "done"
                                                      for n in ("gb-0", "gb-1")):
            time.sleep(0.5)
        reports = tmp_path / "reports"
        reports.mkdir()
        for i, name in enumerate(("gb-0", "gb-1")):
            shown = fabric.exec(name, ["cat", f"/shared/azbench/hosts/c-gpu-00-00000{i}.nvlink"])
            assert shown.returncode == 0, (fabric.boot_state(name), shown.stderr)
            (reports / f"c-gpu-00-00000{i}.nvlink").write_text(shown.stdout)
        inside = fabric.exec("gb-0", ["cat", "/shared/slurm/topology.conf"]).stdout
    finally:
        fabric.close()
    assert (reports / "c-gpu-00-000000.nvlink").read_text() == "5e0c7a11-1111-4222-8333-444455556666 3\n"
    assert (reports / "c-gpu-00-000001.nvlink").read_text() == "unknown\n"
    assert "BlockName=nvl-5e0c7a11-3 Nodes=c-gpu-00-000000" in inside
    out = tmp_path / "topology.conf"
    (tmp_path / "topology.json").write_text(json.dumps(config))
    subprocess.run([sys.executable, str(TOOL), str(tmp_path / "topology.json"), str(reports), str(out)],
                   check=True, capture_output=True)
    text = out.read_text()
    assert "BlockName=nvl-5e0c7a11-3 Nodes=c-gpu-00-000000" in text
    assert "BlockName=c-gpu-00-rack0 Nodes=c-gpu-00-000001" in text and "# warning: 1 node(s)" in text
