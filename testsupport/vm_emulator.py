"""Emulated Azure VMs for the booting fake ARM server: namespaces that run the real cloud-init.

One `Fabric` per fake ARM server: a network namespace holding the VNet's bridge, a /24 of
198.18.0.0/16 (benchmarking range, never routed off this machine) for public IPs, and a state
directory. `Fabric.boot` turns one ARM VM (the head, or one scale-set instance) into an emulated
VM: its own network namespace (eth0 on the bridge with the subnet's private address; pub0 with
the public IP, reachable from the host), and a process started by `unshare` in new mount, UTS and
PID namespaces that runs testsupport/vm_guest.py as the VM's PID 1. The guest builds the VM's own root
file system and pivots into it, writes the NoCloud seed from the customData azbench sent, and
runs Debian's cloud-init (init --local, init, modules config, modules final) with the modules
the user-data uses. `Fabric.delete` kills the VM's `unshare` by pid (its PID 1 dies with it, and
the kernel then kills every process of that PID namespace) and removes the network namespace.

Every way an emulated VM differs from an Azure VM (the emulator's contract):
- Not a kernel of its own: the host's kernel, CPUs and memory. slurmd and anything else using
  hwloc see the size's vCPUs (cores x threads of the Azure size) through HWLOC_SYNTHETIC; other
  programs see the host's CPUs. cgroups mirror the host's hierarchies (v1 or v2), not Ubuntu's.
- systemd is not PID 1: testsupport/vm_guest.py is. `systemctl` is a shim (testsupport/vm_shim.py) that
  starts a unit's ExecStart (with its EnvironmentFile, User, RuntimeDirectory, PIDFile,
  ExecStartPre) from the host's unit file and tracks it by pid; `enable` is recorded only;
  there are no dependencies, sockets, journald, or restarts on failure; a timer can be enabled
  (its unit file must exist) but never fires, so the expiry agent never runs on an emulated head
  (tests/test_expiry.py runs its code against the fake ARM and a fake IMDS instead).
  /run/systemd/system exists so cloud-init takes its systemd code paths. The only service the
  "image" starts at boot is ssh, right after cloud-init's init stage (where Ubuntu orders it).
- Packages are the host's (Debian 12, not Ubuntu 22.04): `apt-get` is a shim; `update` does
  nothing and `install` succeeds for a package dpkg shows installed on the host, or for
  nfs-kernel-server / nfs-common (emulated, below), and fails like apt ("Unable to locate
  package") for anything else. Package postinst scripts do not run (the munge and slurm users
  already exist with the host's uids; munged does not start on install).
- NFS is emulated: `exportfs` records the VM's /etc/exports in the fabric; the nfs-server "unit"
  marks the exports live; `mount.nfs` (so `mount -a -t nfs` from the fstab cloud-init wrote)
  checks that the server is live, exports the path and admits the client's address, then
  bind-mounts the server VM's directory. No root_squash, locking or caching semantics.
- Azure's datasource is replaced by NoCloud: customData (base64 of gzip) is base64-decoded by the
  emulator (cloud-init gunzips it itself); the admin user and its SSH keys come from NoCloud
  meta-data and an emulator cloud.cfg.d (default_user = osProfile.adminUsername, sudo, groups
  adm and sudo); no IMDS, no wireserver "report ready", no walinuxagent, no resource disk.
  The cloud.cfg module lists are the image's, cut to the modules the user-data uses.
- Network: eth0 is configured by the emulator (cloud-init's network config is disabled), not by
  DHCP; the public IP sits on the VM itself (pub0) instead of behind Azure's 1:1 NAT; only the
  host can reach it (no NSG enforcement, no internet, no outbound access). VNet DNS is the
  fabric's /etc/hosts, bind-mounted over each VM's and rewritten as VMs come and go. No
  accelerated networking, no InfiniBand.
- GPUs: none. `nvidia-smi` is a shim: on a VM the fabric gave an NVLink domain (Fabric.nvlink,
  by VM name; Azure's racks are not the scale set's instance order, and a test can say so) or GPU
  hardware (Fabric.gpu: GpuVm), `nvidia-smi -q` prints per emulated GPU its Fabric section
  (State, Status, CliqueId, ClusterUUID) and `--query-gpu=index,name --format=csv,noheader` one
  line per GPU; elsewhere it fails as on a VM without the NVIDIA driver ("NVIDIA-SMI has failed
  because it couldn't communicate with the NVIDIA driver", exit 9). The Fabric section's shape
  follows what Azure/cyclecloud-slurm's topology.py greps (ClusterUUID, CliqueId). `ibstat` prints
  GpuVm.hcas "CA 'mlx5_N'" blocks with one Active InfiniBand port each; `systemctl is-active
  nvidia-imex` answers GpuVm.imex; `nvidia-imex-ctl -N` prints the IMEX domain (every VM of the
  same NVLink domain by private IP, READY or UNAVAILABLE, the connection matrix, the domain
  state), or fails on a VM whose IMEX service is down; on a VM with GpuVm.imex_channel, /dev is a
  copy-on-write overlay of the host's holding /dev/nvidia-caps-imex-channels/channel0 (the host's
  own /dev is never written). No fabric manager, no NVLink traffic.
- File system: the VM's root is a directory in its state dir. /etc, /var, /usr, /opt and /root are
  copy-on-write overlays of the host's (changes stay in the state dir; /usr/bin and /usr/sbin
  carry the shims on top; /root is made 0711 when the stand-in Python lives under it); /run and
  /tmp are tmpfs; /home and /mnt start empty; /shared does not exist until cloud-init makes it;
  other top-level host directories (/opt, /work, ...) are bind-mounted. The fabric directory is
  visible at /run/azbench-emulator. No OS disk size, no ephemeral disk.
- The Python environments: before the head boots, /shared/azbench/python (for recipes) and
  /opt/azbench-expiry (for the expiry agent) are made links to the host's (this interpreter's)
  environment, so the head's cloud-init steps that would create them (venv + pip install torch
  from the CPU index; venv + pip install azure-identity, azure-mgmt-resource) find them present
  and skip. The VM has no package index to install from. An environment under a directory the
  VM gets fresh (/tmp, /run, /home, /mnt) is bind-mounted at its own path so the links resolve.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

GUEST = Path(__file__).with_name("vm_guest.py")
SHIM = Path(__file__).with_name("vm_shim.py")
SHIMMED_BIN = ("systemctl", "apt-get", "nvidia-smi", "nvidia-imex-ctl")
SHIMMED_SBIN = ("exportfs", "mount.nfs", "ibstat")
PUBLIC_NET = ipaddress.ip_network("198.18.0.0/16")
# (cores per socket, threads per core) by vCPU count for the sizes the emulator boots.
_SMT_SIZES = ("_v5", "_v4", "_v3")


@dataclass
class VmSpec:
    """What ARM knows about one VM, as the emulator needs it."""

    name: str          # ARM name: the VM's, or '<scale set>_<instance id>'
    hostname: str      # computerName
    private_ip: str
    prefix_len: int
    public_ip: str | None
    custom_data: str   # base64, as sent in osProfile.customData
    admin_user: str
    ssh_keys: list[str]
    size: str
    vcpus: int


@dataclass
class GpuVm:
    """An emulated GPU VM's hardware and services, as NVIDIA's and the OFED tools report them
    (testsupport/vm_shim.py): GPUs, InfiniBand HCAs, each GPU's fabric State and Status, the
    IMEX service running, the default IMEX channel device present. Defaults: a healthy ND GB200
    v6 VM (4 GPUs, 4 HCAs)."""

    gpus: int = 4
    hcas: int = 4
    fabric_state: str = "Completed"
    fabric_status: str = "Success"
    imex: bool = True
    imex_channel: bool = True


@dataclass
class EmulatedVm:
    spec: VmSpec
    netns: str
    dir: Path
    proc: subprocess.Popen
    pid_ns: str = ""  # /proc/<pid>/ns/pid of the guest, to prove it is gone after delete


@dataclass
class Fabric:
    """The VNet, public-IP range and VMs of one fake ARM server. Needs root."""

    state_dir: Path
    python_env: Path = field(default_factory=lambda: Path(sys.prefix))
    vms: dict[str, EmulatedVm] = field(default_factory=dict)
    # VM name -> (GPU fabric cluster UUID, clique ID): what `nvidia-smi -q` reports there.
    nvlink: dict[str, tuple[str, int]] = field(default_factory=dict)
    # VM name -> what its GPUs, HCAs and IMEX look like (GpuVm); a VM with an NVLink domain and
    # no entry is a healthy GB200 VM (GpuVm()).
    gpu: dict[str, GpuVm] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.tag = f"{os.getpid() % 10000:04d}{random.randrange(36 ** 2):03x}"[:7]
        self.fabric_ns = f"azbf-{self.tag}"
        self.lock = threading.RLock()
        self._public_net = _free_public_net()
        self.gateway = str(self._public_net.network_address + 1)  # the host's side of every public IP
        self._next_public = 10
        self._index = 0
        _ip("netns", "add", self.fabric_ns)
        _ip("-n", self.fabric_ns, "link", "set", "lo", "up")
        _ip("-n", self.fabric_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.fabric_ns, "link", "set", "br0", "up")
        self.hosts_file = self.state_dir / "hosts"
        self._write_hosts()
        self._install_shims()
        for sub in ("nfs", "vms"):
            (self.state_dir / sub).mkdir(exist_ok=True)

    # ------------------------------------------------------------ public IPs
    def public_ip(self) -> str:
        with self.lock:
            addr = str(self._public_net.network_address + self._next_public)
            self._next_public += 1
            return addr

    # ------------------------------------------------------------ VMs
    def boot(self, spec: VmSpec) -> EmulatedVm:
        """Create the VM's namespaces and start its PID 1 (which runs cloud-init). Returns at once."""
        with self.lock:
            if spec.name in self.vms:
                return self.vms[spec.name]
            self._index += 1
            idx = self._index
            netns = f"azbv-{self.tag}-{idx}"
            vdir = self.state_dir / "vms" / spec.name
            if vdir.exists():
                shutil.rmtree(vdir)
            vdir.mkdir(parents=True)
            self._network(netns, idx, spec)
            self._write_vm_files(vdir, spec)
            self.vms[spec.name] = None  # type: ignore[assignment]  # reserved while starting
            self._write_hosts(extra=spec)
        console = open(vdir / "console.log", "ab")
        argv = ["ip", "netns", "exec", netns, "unshare", "--mount", "--uts", "--pid", "--fork",
                "--mount-proc", "--propagation", "private", "--kill-child=SIGKILL",
                "/usr/bin/python3", str(GUEST), str(vdir)]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                start_new_session=True, env=_guest_env(spec))
        console.close()
        vm = EmulatedVm(spec=spec, netns=netns, dir=vdir, proc=proc)
        try:
            vm.pid_ns = os.readlink(f"/proc/{_child_pid(proc.pid)}/ns/pid")
        except (OSError, RuntimeError):
            pass  # the guest died at once: its boot.json or console.log says why
        with self.lock:
            self.vms[spec.name] = vm
        return vm

    def delete(self, name: str, grace_s: float = 3.0) -> None:
        """Stop everything the VM started (by the pid of its unshare) and remove its network."""
        with self.lock:
            vm = self.vms.pop(name, None)
            if vm is None:
                return
            self._write_hosts()
        _stop(vm.proc, grace_s)
        _ip("netns", "del", vm.netns, check=False)
        _forget_exports(self.state_dir / "nfs", vm.spec.private_ip)

    def close(self) -> None:
        for name in list(self.vms):
            self.delete(name, grace_s=1.0)
        _ip("netns", "del", self.fabric_ns, check=False)

    def boot_state(self, name: str) -> dict:
        """The guest's boot.json: {'stage': ..., 'rc': ...}, or {} before it writes one."""
        try:
            return json.loads((self.state_dir / "vms" / name / "boot.json").read_text())
        except (OSError, ValueError):
            return {}

    def live_pids(self, name: str) -> list[int]:
        """Pids in the VM's PID namespace (empty once it is deleted)."""
        vm = self.vms.get(name)
        return _pids_in_ns(vm.pid_ns) if vm and vm.pid_ns else []

    def exec(self, name: str, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command inside the VM's namespaces (for tests and by-hand inspection)."""
        vm = self.vms[name]
        init = _child_pid(vm.proc.pid)
        return subprocess.run(["nsenter", "-t", str(init), "-n", "-m", "-u", "-p", "--", *argv],
                              capture_output=True, text=True, timeout=timeout)

    # ------------------------------------------------------------ internals
    def _network(self, netns: str, idx: int, spec: VmSpec) -> None:
        veth = f"v{self.tag}{idx}"
        _ip("netns", "add", netns)
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("-n", self.fabric_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _ip("-n", self.fabric_ns, "link", "set", veth, "master", "br0", "up")
        _ip("-n", netns, "addr", "add", f"{spec.private_ip}/{spec.prefix_len}", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        if spec.public_ip:
            host_side, gateway = f"p{self.tag}{idx}", self.gateway
            _ip("link", "add", host_side, "type", "veth", "peer", "name", "pub0", "netns", netns)
            _ip("addr", "add", f"{gateway}/32", "dev", host_side)
            _ip("link", "set", host_side, "up")
            _ip("route", "add", f"{spec.public_ip}/32", "dev", host_side, "src", gateway)
            _ip("-n", netns, "addr", "add", f"{spec.public_ip}/32", "dev", "pub0")
            _ip("-n", netns, "link", "set", "pub0", "up")
            _ip("-n", netns, "route", "add", f"{gateway}/32", "dev", "pub0")

    def _write_vm_files(self, vdir: Path, spec: VmSpec) -> None:
        (vdir / "user-data").write_bytes(base64.b64decode(spec.custom_data))
        meta = {"instance-id": f"azbench-emu-{self.tag}-{spec.name}", "local-hostname": spec.hostname,
                "public-keys": spec.ssh_keys}
        (vdir / "meta-data").write_text(json.dumps(meta))
        cores, threads = _topology(spec.size, spec.vcpus)
        (vdir / "vm.json").write_text(json.dumps({
            "name": spec.name, "hostname": spec.hostname, "private_ip": spec.private_ip,
            "prefix_len": spec.prefix_len, "public_ip": spec.public_ip, "admin_user": spec.admin_user,
            "fabric_dir": str(self.state_dir), "python_env": str(self.python_env),
            "hwloc": f"package:1 core:{cores} pu:{threads}",
            "nvlink": list(self.nvlink[spec.name]) if spec.name in self.nvlink else None,
            "gpu": _gpu(self.gpu.get(spec.name) or (GpuVm() if spec.name in self.nvlink else None))}, indent=2))

    def _write_hosts(self, extra: VmSpec | None = None) -> None:
        specs = [vm.spec for vm in self.vms.values() if vm is not None] + ([extra] if extra else [])
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                 "# Azure VNet DNS, emulated by the fabric"]
        lines += [f"{s.private_ip} {s.hostname}" for s in specs]
        # Rewritten in place: the VMs bind-mount this very inode over their /etc/hosts.
        with open(self.hosts_file, "a+") as handle:
            handle.seek(0)
            handle.truncate()
            handle.write("\n".join(lines) + "\n")

    def _install_shims(self) -> None:
        shutil.copy(SHIM, self.state_dir / "vm_shim.py")
        for sub, names in (("bin", SHIMMED_BIN), ("sbin", SHIMMED_SBIN)):
            d = self.state_dir / "shims" / "usr" / sub
            d.mkdir(parents=True, exist_ok=True)
            for name in names:
                path = d / name
                path.write_text(f'#!/bin/sh\nexec /usr/bin/python3 /run/azbench-emulator/vm_shim.py {name} "$@"\n')
                path.chmod(0o755)


def _gpu(vm: GpuVm | None) -> dict | None:
    return None if vm is None else {"gpus": vm.gpus, "hcas": vm.hcas, "fabric_state": vm.fabric_state,
                                    "fabric_status": vm.fabric_status, "imex": vm.imex,
                                    "imex_channel": vm.imex_channel}


def _topology(size: str, vcpus: int) -> tuple[int, int]:
    """(cores, threads per core) Azure gives the size: D*s_v5 has SMT, the ND sizes do not."""
    smt = size.startswith("Standard_D") and size.endswith(_SMT_SIZES) and vcpus >= 2
    return (vcpus // 2, 2) if smt else (max(vcpus, 1), 1)


def _guest_env(spec: VmSpec) -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
            "HOME": "/root", "TERM": "dumb"}


def _free_public_net() -> ipaddress.IPv4Network:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    used += subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    subnets = list(PUBLIC_NET.subnets(new_prefix=24))
    random.shuffle(subnets)
    for net in subnets:
        if f"{'.'.join(str(net.network_address).split('.')[:3])}." not in used:
            return net
    raise RuntimeError("no free /24 in 198.18.0.0/16 for emulated public IPs")


def _ip(*args: str, check: bool = True) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


def _stop(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # unshare's group: with --kill-child, PID 1 follows
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _child_pid(pid: int) -> int:
    """The first child of `pid` (ip netns exec execs unshare; unshare forks the guest)."""
    for _ in range(100):
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise RuntimeError(f"emulated VM process {pid} has no guest child")


def _pids_in_ns(ns: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == ns:
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def _forget_exports(nfs_dir: Path, ip: str) -> None:
    (nfs_dir / f"{ip}.json").unlink(missing_ok=True)


def can_emulate() -> str | None:
    """None when VMs can be emulated here, else the reason (for pytest.skip)."""
    if os.geteuid() != 0:
        return "the VM emulator needs root (network, mount and PID namespaces)"
    # sudo: Azure's images have it and azbench changes Slurm node states through it as the admin user.
    for tool in ("ip", "unshare", "nsenter", "cloud-init", "sshd", "slurmctld", "slurmd", "munged", "sudo"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            return f"the VM emulator needs {tool} (infra/setup.sh installs it)"
    probe = f"azbprobe-{os.getpid()}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if not ok:
        return "network namespaces are not available here (ip netns add failed)"
    return None
