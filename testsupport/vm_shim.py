"""The emulated VM's shims (testsupport/vm_emulator.py): systemctl, apt-get, exportfs, mount.nfs,
nvidia-smi, nvidia-imex-ctl, ibstat.

Runs inside a VM as `python3 /run/azbench-emulator/vm_shim.py NAME ARGS...` (the fabric's
wrappers in /usr/bin and /usr/sbin). Standalone: the host's system Python, no repo imports.
Units live in the host's /lib/systemd/system; their pids in /run/azbench-units/<unit>.pid.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pwd
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

FABRIC = Path("/run/azbench-emulator")
UNITS = Path("/run/azbench-units")
UNIT_DIRS = (Path("/etc/systemd/system"), Path("/lib/systemd/system"))
EMULATED_PACKAGES = {"nfs-kernel-server", "nfs-common"}
BUILTIN_UNITS = {"nfs-server", "nfs-kernel-server"}
IMEX_UNIT = "nvidia-imex"


def die(msg: str, code: int = 1) -> None:
    print(msg, file=sys.stderr)
    sys.exit(code)


def vm() -> dict:
    """This VM's vm.json (the guest copies it to /run/azbench-vm.json at boot)."""
    return json.loads(Path("/run/azbench-vm.json").read_text())


# ---------------------------------------------------------------- systemctl
def systemctl(args: list[str]) -> None:
    words = [a for a in args if not a.startswith("-")]
    now = "--now" in args
    if not words:
        die("systemctl (emulator): no verb")
    verb, units = words[0], [u.removesuffix(".service") for u in words[1:]]
    if verb in ("daemon-reload", "reset-failed", "preset", "mask", "unmask"):
        return
    if verb == "is-active":
        # systemctl(1) is-active: prints each unit's state ("active", "inactive") unless --quiet;
        # exit 0 when all are active, else non-zero (3, as systemd's for an inactive unit).
        states = ["active" if _running(u) else "inactive" for u in units]
        if not ({"--quiet", "-q"} & set(args)):
            print("\n".join(states))
        sys.exit(0 if all(s == "active" for s in states) else 3)
    for unit in units:
        if unit.endswith(".timer"):
            _timer(verb, unit)
        elif verb in ("enable", "disable"):
            _load(unit)  # enabling a unit that does not exist fails, as on systemd
            if now:
                (_start if verb == "enable" else _stop)(unit)
        elif verb in ("start", "reload-or-restart", "try-restart") and not _running(unit):
            _start(unit)
        elif verb in ("restart", "reload-or-restart", "reload"):
            _stop(unit)
            _start(unit)
        elif verb == "stop":
            _stop(unit)
        elif verb not in ("start", "status"):
            die(f"systemctl (emulator): verb '{verb}' is not emulated")


def _timer(verb: str, unit: str) -> None:
    """Timers are recorded, never fired: the unit file must exist, as on systemd."""
    if not any((d / unit).is_file() for d in UNIT_DIRS):
        die(f"Failed to enable unit: Unit file {unit} does not exist.", 5)
    if verb not in ("enable", "disable", "start", "stop", "status", "restart"):
        die(f"systemctl (emulator): verb '{verb}' is not emulated for timers")


def _load(unit: str) -> dict[str, list[str]]:
    if unit in BUILTIN_UNITS:
        return {}
    for d in UNIT_DIRS:
        for name in (unit, *_aliases(d, unit)):
            path = d / f"{name}.service"
            if path.is_file():
                return _parse(path.resolve())
    die(f"Failed to enable unit: Unit file {unit}.service does not exist.", 5)
    return {}


def _aliases(d: Path, unit: str) -> list[str]:
    out = []
    for path in d.glob("*.service"):
        try:
            if f"Alias={unit}.service" in path.read_text():
                out.append(path.stem)
        except OSError:
            continue
    return out


def _parse(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def _env(unit: dict[str, list[str]]) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HWLOC_SYNTHETIC": os.environ.get("HWLOC_SYNTHETIC", "")}
    for spec in unit.get("EnvironmentFile", []):
        optional, path = spec.startswith("-"), Path(spec.lstrip("-"))
        if not path.is_file():
            if optional:
                continue
            die(f"systemctl (emulator): EnvironmentFile {path} is missing")
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, value = line.split("=", 1)
                env[key.strip()] = " ".join(shlex.split(value))
    return env


def _argv(cmd: str, env: dict[str, str]) -> list[str]:
    out = []
    for word in shlex.split(cmd.lstrip("-@+!")):
        if word.startswith("$") and not word.startswith("${"):
            out += env.get(word[1:], "").split()
        else:
            out.append(word)
    return out


def _start(unit: str) -> None:
    UNITS.mkdir(exist_ok=True)
    if unit in BUILTIN_UNITS:
        return _nfs_server(True)
    spec = _load(unit)
    env = _env(spec)
    user = (spec.get("User") or ["root"])[0]
    pw = pwd.getpwnam(user)
    for rd in spec.get("RuntimeDirectory", []):
        path = Path("/run") / rd
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        path.chmod(int((spec.get("RuntimeDirectoryMode") or ["0755"])[0], 8))
    drop = [] if user == "root" else ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"]
    for pre in spec.get("ExecStartPre", []):
        done = subprocess.run(drop + _argv(pre, env), env=env, capture_output=True, text=True)
        if done.returncode != 0 and not pre.startswith("-"):
            die(f"Job for {unit}.service failed: ExecStartPre {pre}: {done.stderr.strip()}")
    log = open(f"/var/log/azbench-unit-{unit}.log", "ab")
    argv = drop + _argv(spec["ExecStart"][0], env)
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    if (spec.get("Type") or ["simple"])[0] == "forking":
        rc = proc.wait(timeout=60)
        pidfile = Path((spec.get("PIDFile") or [""])[0])
        for _ in range(100):
            if rc != 0 or pidfile.is_file():
                break
            time.sleep(0.05)
        if rc != 0 or not pidfile.is_file():
            die(f"Job for {unit}.service failed: {' '.join(argv)} exited {rc} (see /var/log/azbench-unit-{unit}.log)")
        pid = int(pidfile.read_text().split()[0])
    else:
        time.sleep(0.5)  # a unit that dies at once (bad config) fails the start, as systemd's would
        if proc.poll() is not None:
            die(f"Job for {unit}.service failed: {' '.join(argv)} exited {proc.returncode} "
                f"(see /var/log/azbench-unit-{unit}.log)")
        pid = proc.pid
    (UNITS / f"{unit}.pid").write_text(str(pid))


def _running(unit: str) -> bool:
    if unit == IMEX_UNIT and gpu() is not None:  # the image's IMEX service, as the fabric set it
        return bool(gpu()["imex"])
    if unit in BUILTIN_UNITS:
        return _exports().get("running", False)
    try:
        pid = int((UNITS / f"{unit}.pid").read_text())
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, ValueError):
        return False


def _stop(unit: str) -> None:
    if unit in BUILTIN_UNITS:
        return _nfs_server(False)
    path = UNITS / f"{unit}.pid"
    if not _running(unit):
        path.unlink(missing_ok=True)
        return
    pid = int(path.read_text())
    os.kill(pid, 15)
    for _ in range(100):
        if not _running(unit):
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
    path.unlink(missing_ok=True)


# ---------------------------------------------------------------- apt-get
def apt_get(args: list[str]) -> None:
    words = [a for a in args if not a.startswith("-")]
    if not words or words[0] in ("update", "upgrade", "dist-upgrade", "clean"):
        return
    if words[0] != "install":
        die(f"apt-get (emulator): '{words[0]}' is not emulated")
    missing = []
    for pkg in words[1:]:
        pkg = pkg.split("=")[0]
        if pkg in EMULATED_PACKAGES:
            continue
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if "install ok installed" not in out.stdout:
            missing.append(pkg)
    if missing:
        die("\n".join(f"E: Unable to locate package {p}" for p in missing), 100)


# ---------------------------------------------------------------- NFS
def _exports_path() -> Path:
    return FABRIC / "nfs" / f"{vm()['private_ip']}.json"


def _exports(path: Path | None = None) -> dict:
    try:
        return json.loads((path or _exports_path()).read_text())
    except (OSError, ValueError):
        return {}


def _save_exports(data: dict) -> None:
    path = _exports_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def exportfs(args: list[str]) -> None:
    """exportfs -ra / -r / -a: publish /etc/exports; each path maps to this VM's own directory."""
    me = vm()
    table = {}
    for line in Path("/etc/exports").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        path, *clients = line.split()
        if not Path(path).is_dir():
            die(f"exportfs: Failed to stat {path}: No such file or directory")
        host_dir = Path(me["fabric_dir"]) / "vms" / me["name"] / "root" / path.strip("/")
        if not (FABRIC / host_dir.relative_to(me["fabric_dir"])).is_dir():
            die(f"exportfs (emulator): {path} is not a directory of the VM's own root")
        table[path] = {"dir": str(host_dir), "clients": [c.split("(")[0] for c in clients]}
    data = _exports()
    data["exports"] = table
    _save_exports(data)


def _nfs_server(up: bool) -> None:
    data = _exports()
    if up and not data.get("exports"):
        subprocess.run(["exportfs", "-r"], check=False)
        data = _exports()
    data["running"] = up
    _save_exports(data)


def mount_nfs(args: list[str]) -> None:
    """mount.nfs SERVER:/PATH DIR [-o opts]: bind the server VM's exported directory."""
    if len(args) < 2 or ":" not in args[0]:
        die("usage: mount.nfs remotetarget dir [-o options]")
    server, path = args[0].split(":", 1)
    target = args[1]
    addr = _resolve(server)
    table = _exports(FABRIC / "nfs" / f"{addr}.json")
    if not table.get("running"):
        die(f"mount.nfs: Connection refused for {server}:{path} on {target}", 32)
    entry = table.get("exports", {}).get(path.rstrip("/") or "/")
    me = ipaddress.ip_address(vm()["private_ip"])
    if entry is None or not any(_admits(c, me) for c in entry["clients"]):
        die(f"mount.nfs: access denied by server while mounting {server}:{path}", 32)
    host_dir = str(FABRIC / Path(entry["dir"]).relative_to(vm()["fabric_dir"]))
    ro = "-o" in args and "ro" in args[args.index("-o") + 1].split(",")
    subprocess.run(["mount", "--bind", *(["-o", "ro"] if ro else []), host_dir, target], check=True)


# ---------------------------------------------------------------- nvidia-smi, ibstat, IMEX
def nvidia_smi(args: list[str]) -> None:
    """`nvidia-smi -q`: the Fabric section of each GPU of this VM, with the NVLink domain the
    fabric gave it; `--query-gpu=index,name --format=csv,noheader`: "0, NVIDIA GB200" per GPU
    (nvidia-smi(1)). Without GPUs, nvidia-smi's answer on a driverless VM."""
    hw = gpu()
    if hw is None:
        die("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
            "that the latest NVIDIA driver is installed and running.", 9)
    if any(a.startswith("--query-gpu=") for a in args):
        for i in range(hw["gpus"]):
            print(f"{i}, NVIDIA GB200")
        return
    if "-q" not in args:
        die("nvidia-smi (azbench emulator): only -q and --query-gpu=index,name are emulated", 2)
    uuid, clique = vm().get("nvlink") or ("N/A", "N/A")
    print(f"\n==============NVSMI LOG==============\n\nAttached GPUs                             : {hw['gpus']}")
    for i in range(hw["gpus"]):
        print(f"GPU 00000009:0{i}:00.0\n    Product Name                          : NVIDIA GB200\n"
              f"    Fabric\n        State                             : {hw['fabric_state']}\n"
              f"        Status                            : {hw['fabric_status']}\n"
              f"        CliqueId                          : {clique}\n"
              f"        ClusterUUID                       : {uuid}\n"
              f"        Health\n            Bandwidth                     : Full")


def gpu() -> dict | None:
    """This VM's GPU hardware (vm_emulator.GpuVm) or None; an NVLink domain alone means a
    healthy GB200 VM, as before GpuVm existed."""
    me = vm()
    return me.get("gpu") or ({"gpus": 4, "hcas": 4, "fabric_state": "Completed", "fabric_status": "Success",
                              "imex": True, "imex_channel": True} if me.get("nvlink") else None)


def ibstat(args: list[str]) -> None:
    """`ibstat`: a "CA 'mlx5_N'" block per HCA, one Active InfiniBand port each, in
    infiniband-diags' layout (as NVIDIA/nccl#1591 quotes it from a 400G NDR node)."""
    hw = gpu()
    if hw is None or not hw["hcas"]:
        die("ibstat (azbench emulator): this VM has no InfiniBand HCA", 1)
    for i in range(hw["hcas"]):
        print(f"CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.41.1000\n"
              f"\tHardware version: 0\n\tNode GUID: 0x9c63c00300{i:06x}\n\tSystem image GUID: 0x9c63c00300{i:06x}\n"
              f"\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: {100 + i}\n"
              f"\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa751e848\n\t\tPort GUID: 0x9c63c00300{i:06x}\n"
              f"\t\tLink layer: InfiniBand")


def nvidia_imex_ctl(args: list[str]) -> None:
    """`nvidia-imex-ctl -N`: the IMEX domain as NVIDIA's tool prints it (the IMEX guide's
    command service; the legend, "Node #N - ADDR - READY - Version", the "Nodes From\\To"
    matrix and "Domain State", as AWS ParallelCluster's p6e-gb200 guide shows a healthy 18-node
    one). The domain is every emulated VM of this VM's NVLink domain, by private IP; a VM whose
    IMEX service is down is UNAVAILABLE, its connections I, the domain DEGRADED. Run on a VM whose
    own service is down it fails (the failure text is the emulator's)."""
    hw, me = gpu(), vm()
    if "-N" not in args:
        die("nvidia-imex-ctl (azbench emulator): only -N is emulated", 2)
    if hw is None or not hw["imex"]:
        die("nvidia-imex-ctl (azbench emulator): the local IMEX service is not running", 1)
    peers = []
    for path in sorted((FABRIC / "vms").glob("*/vm.json")):
        try:
            other = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if other.get("nvlink") and other["nvlink"] == me.get("nvlink"):
            up = bool((other.get("gpu") or {"imex": True})["imex"])
            peers.append((other["private_ip"], up))
    peers.sort(key=lambda p: ipaddress.ip_address(p[0]))
    print("Connectivity Table Legend:\nI - Invalid - Node wasn't reachable, no connection status available\n"
          "N - Never Connected\nR - Recovering - Connection was lost, but clean up has not yet been triggered.\n"
          "D - Disconnected - Connection was lost, and clean up has been triggreed.\n"
          "A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.\n"
          "!V! - Version mismatch, communication disabled.\n!M! - Node map mismatch, communication disabled.\n"
          "C - Connected - Ready for operation\n\n" + time.strftime("%m/%d/%Y %H:%M:%S.000") + "\nNodes:")
    for i, (address, up) in enumerate(peers):
        print(f"Node #{i:<3d}- {address:<15s} - {'READY' if up else 'UNAVAILABLE':<20s} - Version: 570.172")
    print("\n Nodes From\\To  " + "   ".join(f"{i:<1d}" for i in range(len(peers))))
    for i, (_, up_from) in enumerate(peers):
        cells = ["C" if up_from and up_to else "I" for _, up_to in peers]
        print(f"      {i:2d}        " + "   ".join(cells))
    print(f"\nDomain State: {'UP' if all(up for _, up in peers) else 'DEGRADED'}")


def _resolve(server: str) -> str:
    try:
        return str(ipaddress.ip_address(server))
    except ValueError:
        try:
            return socket.gethostbyname(server)
        except OSError:
            die(f"mount.nfs: Failed to resolve server {server}: Name or service not known", 32)
    return ""


def _admits(client: str, addr: ipaddress.IPv4Address) -> bool:
    if client == "*":
        return True
    try:
        return addr in ipaddress.ip_network(client, strict=False)
    except ValueError:
        return False


def main() -> None:
    name, args = sys.argv[1], sys.argv[2:]
    {"systemctl": systemctl, "apt-get": apt_get, "exportfs": exportfs, "mount.nfs": mount_nfs,
     "nvidia-smi": nvidia_smi, "nvidia-imex-ctl": nvidia_imex_ctl, "ibstat": ibstat}[name](args)


if __name__ == "__main__":
    main()
