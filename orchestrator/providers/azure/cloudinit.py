"""Cluster secrets and cloud-init for Azure clusters: keys, slurm.conf, topology, custom data.

`load_or_create_secrets` makes (once, under the cluster dir, files 0600) the admin SSH key pair,
the head's SSH host key pair (injected through cloud-init, so known_hosts is pinned at `up`) and
the munge key. `head_cloud_init` / `node_cloud_init` render templates/cloud-init-*.yaml.j2 with
the same slurm.conf template as the local provider and a topology from the scale sets (one IB
switch per scale set; GB200: one Slurm block per NVL72 rack where the image's Slurm has
topology/block, else a leaf switch per rack (slurm/topology.py); none for CPU sizes, which have
no IB). For CPU sizes the head also installs, once, a Python environment with CPU torch on the
shared file system (PYTHON_ENV), which every node's recipes use. `custom_data` gzips and base64s.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import secrets as pysecrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.hardware.catalog import GpuSku
from orchestrator.errors import ProvisionError
from orchestrator.models import ScaleSetPlan
from orchestrator.paths import templates_dir
from orchestrator.slurm.conf import SlurmConfParams, SlurmNode, compress_hostlist, render_slurm_conf
from orchestrator.slurm.topology import BLOCK, rack_topology
from orchestrator.templating import render

ADMIN_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"
MUNGE_KEY = "munge.key"
KNOWN_HOSTS = "known_hosts"
WORKDIR = "/shared/azbench"
PYTHON_ENV = f"{WORKDIR}/python"  # CPU sizes: made by the head's cloud-init, shared over NFS
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PARTITION = "gpu"
SPOT_AGENT = "spot_agent.py"
NVLINK_TOPOLOGY = "nvlink_topology.py"  # rebuilds topology.conf from the nodes' NVLink domains
FABRIC_CHECK = "fabric_node_check.py"  # a GPU node's GPUs and HCAs counted at boot, before slurmd
# The head's slurmctld reads the first; the nodes' /etc/slurm/topology.conf links to the second.
TOPOLOGY_FILES = ("/etc/slurm/topology.conf", "/shared/slurm/topology.conf")
MAX_CUSTOM_DATA = 65_535  # bytes before base64 (Azure's customData limit)
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class ClusterSecrets:
    admin_key_path: Path
    admin_public_key: str
    host_private_key: str
    host_public_key: str
    munge_key_b64: str


@dataclass(frozen=True)
class HeadContext:
    cluster: str
    host_private_key: str
    host_public_key: str
    munge_key_b64: str
    subnet_cidr: str
    slurm_conf: str
    topology: list[str]
    topology_note: str
    python_env: str | None = None  # where to install Python + CPU torch (CPU sizes only)
    torch_index: str = TORCH_CPU_INDEX
    workdir: str = WORKDIR
    expiry: object | None = None  # azure_expiry.AgentContext: the head deletes its own cluster
    # NVLink racks (GB200): templates/nvlink_topology.py and its topology.json (the plan's racks,
    # the fallback), installed on /shared for the nodes to run once they report their domain.
    nvlink_tool: str = ""
    nvlink_config: str = ""


@dataclass(frozen=True)
class NodeContext:
    cluster: str
    head_addr: str
    munge_key_b64: str
    gpus: int
    scale_sets: str
    spot_agent: str = ""  # templates/spot_agent.py for spot clusters; "" = no agent
    nvlink: bool = False  # report the NVLink domain at boot and rebuild the rack topology
    fabric_check: str = ""  # templates/fabric_node_check.py on GPU sizes: GPUs and HCAs at boot
    ib_hcas: int = 0  # the InfiniBand HCAs the size has (catalog ib_links)


def load_or_create_secrets(cluster_dir: Path) -> ClusterSecrets:
    """The cluster's keys, generated on the first `up` and reused by every rerun."""
    cluster_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    admin = cluster_dir / ADMIN_KEY
    host = cluster_dir / HOST_KEY
    munge = cluster_dir / MUNGE_KEY
    for path, comment in ((admin, "azbench-admin"), (host, "azbench-head-host")):
        if not path.exists():
            _write_keypair(path, comment)
    if not munge.exists():
        _write_private(munge, base64.b64encode(pysecrets.token_bytes(1024)))
    return ClusterSecrets(
        admin_key_path=admin, admin_public_key=(cluster_dir / f"{ADMIN_KEY}.pub").read_text().strip(),
        host_private_key=host.read_text().strip(),
        host_public_key=(cluster_dir / f"{HOST_KEY}.pub").read_text().strip(),
        munge_key_b64=munge.read_text().strip())


def write_known_hosts(cluster_dir: Path, host: str, host_public_key: str) -> Path:
    """known_hosts with the head's injected host key pinned for `host` (port 22)."""
    key_type, key_b64 = host_public_key.split()[:2]
    path = cluster_dir / KNOWN_HOSTS
    _write_private(path, f"{host} {key_type} {key_b64}\n".encode())
    return path


def node_hostnames(scale_set: ScaleSetPlan) -> list[str]:
    """Computer names Azure gives a Uniform scale set's VMs: prefix + 6 base-36 digits of the id.

    Assumes instance ids 0..n-1, which holds for a fresh set with overprovision off.
    """
    return [f"{computer_name_prefix(scale_set)}{_base36(i)}" for i in range(scale_set.vms)]


def computer_name_prefix(scale_set: ScaleSetPlan) -> str:
    return f"{scale_set.name}-"


def host_of(scale_set: str, instance_id: int) -> str:
    """The computer name of instance `instance_id` of `scale_set` (see node_hostnames)."""
    return f"{scale_set}-{_base36(instance_id)}"


def slot_count(scale_set: ScaleSetPlan, rack: int = 1) -> int:
    """Instance-id slots slurm.conf defines for a scale set: its VMs plus spares in state FUTURE
    (at least 8, a quarter of the set; where the size has NVLink racks, that in whole racks plus
    one rack more, for a resize that grows by a rack). A replaced or
    added VM gets the next unused instance id (Azure never reuses one), so its computer name is
    already a Slurm node: slurmd registers it and Slurm makes the FUTURE node idle, with no
    slurm.conf rewrite and no slurmctld restart (the local provider's finding on 22.05,
    providers/local/provider.py). The count is kept as the scale set's azbench-slots tag."""
    spares = max(8, scale_set.vms // 4)
    if rack > 1:  # whole racks, and one more: a resize grows a set by whole racks
        spares = (-(-spares // rack) + 1) * rack
    return scale_set.vms + spares


def rack_of(sku: GpuSku, scale_set: ScaleSetPlan) -> int:
    """The VMs per NVLink rack of `scale_set` as the plan laid it out (its VMs over its racks:
    18, or 16 as Azure's record run), 1 without NVLink racks: the unit of its spare slots."""
    if sku.nvlink_domain_vms <= 1:
        return 1
    return scale_set.vms // scale_set.racks if scale_set.racks else sku.nvlink_domain_vms


def spare_hostnames(scale_set: ScaleSetPlan, rack: int = 1) -> list[str]:
    """The FUTURE slots of a fresh scale set: instance ids vms .. slot_count - 1."""
    return [host_of(scale_set.name, i) for i in range(scale_set.vms, slot_count(scale_set, rack))]


def head_hostname(cluster: str) -> str:
    return f"{cluster}-head"


def image_slurm(image: Mapping[str, str] | None) -> tuple[int, int] | None:
    """The Slurm (major, minor) the node image's distribution installs, where azbench knows it:
    Ubuntu 24.04 (the Ubuntu-HPC "2404*" skus) ships slurm-wlm 23.11 (https://manpages.ubuntu.com/
    manpages/noble/man5/topology.conf.5.html: "Provided by: slurm-client_23.11.4-1.2ubuntu5").
    None otherwise (Ubuntu 22.04 ships an older one): topology/tree, which every version has."""
    sku = (image or {}).get("sku") or ""
    return (23, 11) if sku.startswith("2404") else None


def nvlink_racks(sku: GpuSku, sets: list[ScaleSetPlan]) -> dict[str, list[str]]:
    """Each set's NVL72 racks by instance order, then its spare slots as spare racks of the
    set's own rack size (rack_of), so VMs a resize adds a rack at a time fill one spare rack."""
    out: dict[str, list[str]] = {}
    for s in sets:
        hosts, racks = node_hostnames(s), s.racks or 1
        per_rack = s.vms // racks
        rack = rack_of(sku, s)
        for r in range(racks):
            out[f"{s.name}-rack{r}"] = hosts[r * per_rack:(r + 1) * per_rack]
        spares = spare_hostnames(s, rack)
        for k in range(0, len(spares), rack):
            out[f"{s.name}-spare{k // rack}"] = spares[k:k + rack]
    return out


def slurm_params(cluster: str, head_addr: str, sku: GpuSku, sets: list[ScaleSetPlan],
                 slurm_version: tuple[int, int] | None = None) -> SlurmConfParams:
    nodes = [SlurmNode(name=h, hostname=h, addr=h, cpus=sku.vcpus, gpus=sku.gpus_per_vm, state=state)
             for s in sets
             for hosts, state in ((node_hostnames(s), "UNKNOWN"), (spare_hostnames(s, rack_of(sku, s)), "FUTURE"))
             for h in hosts]
    plugin = (rack_topology({}, slurm_version)[0] if sku.nvlink_domain_vms > 1
              else "topology/tree" if sku.ib_links else None)
    return SlurmConfParams(
        cluster_name=cluster, controller_host=head_hostname(cluster), controller_addr=head_addr,
        state_dir="/var/spool/slurmctld", spool_dir="/var/spool/slurmd", log_dir="/var/log/slurm",
        pid_dir="/run", jobcomp_file="/shared/slurm/jobcomp.txt", nodes=nodes, partition=PARTITION,
        oversubscribe="EXCLUSIVE", slurmd_timeout=300, message_timeout=30, kill_wait=30,
        topology_plugin=plugin)


def topology(sku: GpuSku, sets: list[ScaleSetPlan],
             slurm_version: tuple[int, int] | None = None) -> tuple[list[str], str]:
    """topology.conf lines and a one-line note saying what they model (slurm/topology.py
    renders the NVLink racks: blocks on Slurm >= 23.11, leaf switches before)."""
    if sku.nvlink_domain_vms > 1:
        plugin, lines = rack_topology(nvlink_racks(sku, sets), slurm_version)
        if plugin == BLOCK:
            return lines, ("one block per NVL72 rack, by instance order until the nodes report their "
                           "NVLink domain (azbench-topology rebuilds it), then spare racks")
        return lines, ("one leaf switch per NVL72 rack (this Slurm has no topology/block), by instance "
                       "order until the nodes report their NVLink domain, then spare racks")
    if not sku.ib_links:
        return [], "none: no InfiniBand on this size, Slurm's topology plugin is off"
    lines = [f"SwitchName={s.name} Nodes={compress_hostlist(node_hostnames(s) + spare_hostnames(s))}"
             for s in sets]
    if len(sets) > 1:
        lines.append(f"SwitchName=top Switches={','.join(s.name for s in sets)}")
    return lines, "one switch per scale set (each scale set is one InfiniBand fabric)"


def head_cloud_init(cluster: str, sku: GpuSku, sets: list[ScaleSetPlan], head_addr: str,
                    subnet_cidr: str, sec: ClusterSecrets, expiry: object | None = None,
                    slurm_version: tuple[int, int] | None = None) -> str:
    """`slurm_version`: the node image's Slurm (image_slurm), which picks the rack topology."""
    lines, note = topology(sku, sets, slurm_version)
    params = slurm_params(cluster, head_addr, sku, sets, slurm_version)
    ctx = HeadContext(cluster=cluster, host_private_key=sec.host_private_key,
                      host_public_key=sec.host_public_key, munge_key_b64=sec.munge_key_b64,
                      subnet_cidr=subnet_cidr,
                      slurm_conf=render_slurm_conf(params).rstrip("\n"),
                      topology=lines, topology_note=note, expiry=expiry,
                      python_env=None if sku.gpus_per_vm else PYTHON_ENV,
                      **_nvlink_files(sku, sets, slurm_version))
    return _render("cloud-init-head.yaml.j2", ctx)


def recipe_env(sku: GpuSku) -> dict[str, str]:
    """The cluster env azbench exports on the head: CPU sizes run recipes with PYTHON_ENV."""
    return {} if sku.gpus_per_vm else {"AZBENCH_PYTHON": f"{PYTHON_ENV}/bin/python"}


def node_cloud_init(cluster: str, sku: GpuSku, sets: list[ScaleSetPlan], head_addr: str,
                    sec: ClusterSecrets, *, spot: bool = False) -> str:
    """A GPU node's cloud-config; spot nodes also get the spot agent (templates/spot_agent.py)
    as a systemd unit, which turns an eviction notice into a checkpoint. GPU nodes count their
    GPUs and InfiniBand HCAs before slurmd starts (templates/fabric_node_check.py --boot): a
    short node fails its boot with the reason, which `up` reads to replace it (azure/boot.py)."""
    agent = (templates_dir() / SPOT_AGENT).read_text() if spot else ""
    check = (templates_dir() / FABRIC_CHECK).read_text() if sku.gpus_per_vm else ""
    ctx = NodeContext(cluster=cluster, head_addr=head_addr, munge_key_b64=sec.munge_key_b64,
                      gpus=sku.gpus_per_vm, scale_sets=compress_hostlist([s.name for s in sets]),
                      spot_agent=agent, nvlink=sku.nvlink_domain_vms > 1, fabric_check=check,
                      ib_hcas=sku.ib_links)
    return _render("cloud-init-node.yaml.j2", ctx)


def _nvlink_files(sku: GpuSku, sets: list[ScaleSetPlan],
                  slurm_version: tuple[int, int] | None) -> dict[str, str]:
    """The head's azbench-topology and its config, for sizes with NVLink racks (else none)."""
    if sku.nvlink_domain_vms <= 1:
        return {}
    plugin = rack_topology({}, slurm_version)[0]
    rack = max(sku.nvlink_domain_vms, 1)
    # Each set's spare racks come in its own rack size (rack_of: 16 where up laid racks of 16).
    config = json.dumps({"plugin": plugin, "rack": rack, "sets": [
        {"name": s.name, "vms": s.vms, "racks": s.racks or 1, "rack": rack_of(sku, s),
         "slots": slot_count(s, rack_of(sku, s))} for s in sets]})
    return {"nvlink_tool": (templates_dir() / NVLINK_TOPOLOGY).read_text(), "nvlink_config": config}


def custom_data(text: str, what: str) -> str:
    """base64(gzip(text)) for osProfile.customData; cloud-init unpacks gzip by itself."""
    packed = gzip.compress(text.encode(), mtime=0)
    if len(packed) > MAX_CUSTOM_DATA:
        raise ProvisionError(f"cloud-init for {what} is {len(packed):,} bytes compressed, over Azure's "
                             f"{MAX_CUSTOM_DATA:,}-byte customData limit")
    return base64.b64encode(packed).decode()


def _render(name: str, ctx: object) -> str:
    return render(name, templates_dir=templates_dir(), c=ctx)  # looked up here: tests swap the folder


def _base36(i: int) -> str:
    out = ""
    for _ in range(6):
        i, r = divmod(i, 36)
        out = _B36[r] + out
    return out


def _write_keypair(path: Path, comment: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    _write_private(path, private)
    Path(f"{path}.pub").write_text(f"{public.decode()} {comment}\n")


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start: the key is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
