"""PID 1 of an emulated Azure VM (see testsupport/vm_emulator.py): private file system, then cloud-init.

Run by the emulator as `unshare --mount --uts --pid --fork --mount-proc ... python3 vm_guest.py
VMDIR` inside the VM's network namespace. Standalone (the host's system Python, no repo imports).
Writes VMDIR/boot.json ({"stage", "rc", "detail"}) as it goes; then reaps orphans until killed.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FABRIC_MOUNT = "/run/azbench-emulator"
# Copy-on-write over the host's; the rest of the host's top level is bind-mounted as it is.
OVERLAYS = ("etc", "var", "root", "opt")
TMPFS = ("run", "tmp")
EMPTY = ("home", "mnt", "media", "srv")
SKIP = ("proc", "sys", "dev", "lost+found", "old_root", "shared", "usr", "boot")
# The cloud-init modules the azbench user-data uses (plus what Azure's own first boot runs:
# host name, the admin user and its keys, ssh), in the order of the image's cloud.cfg.
MODULES = {"bootcmd", "write-files", "write_files", "mounts", "set_hostname", "update_hostname",
           "update_etc_hosts", "users-groups", "users_groups", "ssh", "set-passwords", "set_passwords",
           "runcmd", "package-update-upgrade-install", "package_update_upgrade_install",
           "write-files-deferred", "write_files_deferred", "scripts-user", "scripts_user",
           "final-message", "final_message", "ssh-authkey-fingerprints"}
STAGES = (("init-local", ["cloud-init", "init", "--local"]), ("init", ["cloud-init", "init"]),
          ("ssh", ["systemctl", "start", "ssh"]),
          ("modules-config", ["cloud-init", "modules", "--mode=config"]),
          ("modules-final", ["cloud-init", "modules", "--mode=final"]))


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True)


def mount_private(cfg: dict) -> Path:
    """Build the VM's root under its directory and pivot into it; returns the VM dir seen from inside.

    /home, /mnt are empty plain directories (not mount points: `mountpoint -q /home` is false, as
    on a fresh VM); /shared does not exist until cloud-init makes it.
    """
    vdir = Path(cfg["fabric_dir"]) / "vms" / cfg["name"]
    root = vdir / "root"
    root.mkdir()
    sh("mount", "--bind", str(root), str(root))
    for name in sorted(os.listdir("/")):
        src, dst = Path("/") / name, root / name
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif not src.is_dir() or name in SKIP:
            continue
        elif name in OVERLAYS:
            overlay(vdir, name, f"/{name}", dst)
        elif name in TMPFS or name in EMPTY:
            dst.mkdir()
        else:
            dst.mkdir()
            sh("mount", "--rbind", str(src), str(dst))
    # /usr: the host's, copy-on-write (/usr/local gets written), the shims over /usr/bin, /usr/sbin.
    overlay(vdir, "usr", f"{cfg['fabric_dir']}/shims/usr:/usr", root / "usr")
    for name in ("proc", "sys", "dev"):
        (root / name).mkdir()
    sh("mount", "--rbind", "/sys", str(root / "sys"))
    mount_cgroups(root / "sys/fs/cgroup")
    if (cfg.get("gpu") or {}).get("imex_channel"):
        private_dev(vdir, root / "dev")
    else:
        sh("mount", "--rbind", "/dev", str(root / "dev"))
    for name in TMPFS:
        sh("mount", "-t", "tmpfs", "-o", f"mode={'1777' if name == 'tmp' else '0755'},nosuid,nodev",
           "tmpfs", str(root / name))
    # The stand-in Python environment must stay visible where it lives, even under a directory
    # the VM gets fresh (a checkout in /tmp: its .venv would be hidden by the VM's own /tmp).
    env = Path(cfg["python_env"]).resolve()
    if len(env.parts) > 1 and env.parts[1] in TMPFS + EMPTY:
        (root / env.relative_to("/")).mkdir(parents=True, exist_ok=True)
        sh("mount", "--rbind", str(env), str(root / env.relative_to("/")))
    (root / FABRIC_MOUNT.strip("/")).mkdir(parents=True)
    sh("mount", "--bind", cfg["fabric_dir"], str(root / FABRIC_MOUNT.strip("/")))
    sh("mount", "--bind", f"{cfg['fabric_dir']}/hosts", str(root / "etc/hosts"))
    os.chdir(root)
    (root / ".oldroot").mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(155, b".", b".oldroot") != 0:  # SYS_pivot_root on x86_64
        raise OSError(ctypes.get_errno(), "pivot_root")
    os.chdir("/")
    sh("mount", "-t", "proc", "proc", "/proc")
    sh("umount", "-l", "/.oldroot")
    os.rmdir("/.oldroot")
    Path("/run/azbench-vm.json").write_text(json.dumps(cfg))
    for d in ("/run/systemd/system", "/run/lock"):
        os.makedirs(d, exist_ok=True)
    return Path(FABRIC_MOUNT) / "vms" / cfg["name"]


def private_dev(vdir: Path, target: Path) -> None:
    """/dev as a copy-on-write overlay of the host's (its submounts bound again), holding the
    default IMEX channel a GB200 node's administrator creates (NVIDIA IMEX guide, "IMEX
    Channels": mknod /dev/nvidia-caps-imex-channels/channel0 c <major> 0); the host's /dev is
    never written."""
    overlay(vdir, "dev", "/dev", target)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith("/dev/") and point.count("/") == 2 and (target / point[5:]).is_dir():
            sh("mount", "--rbind", point, str(target / point[5:]))
    channels = target / "nvidia-caps-imex-channels"
    channels.mkdir(exist_ok=True)
    os.mknod(channels / "channel0", 0o666 | 0o020000, os.makedev(234, 0))  # S_IFCHR; 234: the guide's example


def mount_cgroups(target: Path) -> None:
    """`ip netns exec` gave this namespace a sysfs without cgroups; slurmd needs them. Mount the
    hierarchies this process belongs to (the host's layout, v1 or v2), as systemd would."""
    lines = [ln.split(":", 2) for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln]
    if len(lines) == 1 and lines[0][1] == "":
        sh("mount", "-t", "cgroup2", "cgroup2", str(target))
        return
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(target))
    for _, controllers, _ in lines:
        name = controllers.removeprefix("name=") if controllers else "unified"
        (target / name).mkdir()
        if controllers:
            sh("mount", "-t", "cgroup", "-o", controllers, "cgroup", str(target / name))
        else:
            sh("mount", "-t", "cgroup2", "cgroup2", str(target / name))


def overlay(vdir: Path, name: str, lower: str, target: Path) -> None:
    base = vdir / "overlay" / name
    (base / "upper").mkdir(parents=True)
    (base / "work").mkdir()
    target.mkdir(exist_ok=True)
    sh("mount", "-t", "overlay", "overlay", "-o",
       f"lowerdir={lower},upperdir={base / 'upper'},workdir={base / 'work'}", str(target))


def seed(vdir: Path, cfg: dict) -> None:
    """The NoCloud seed (Azure's customData and osProfile) and the emulator's cloud.cfg.d."""
    nocloud = Path("/var/lib/cloud/seed/nocloud")
    nocloud.mkdir(parents=True, exist_ok=True)
    (nocloud / "user-data").write_bytes((vdir / "user-data").read_bytes())
    (nocloud / "meta-data").write_text((vdir / "meta-data").read_text())
    for stale in ("/etc/hostname", "/etc/machine-id"):
        Path(stale).write_text("localhost\n" if stale.endswith("hostname") else "")
    cfg_dir = Path("/etc/cloud/cloud.cfg.d")
    cfg_dir.mkdir(parents=True, exist_ok=True)
    (cfg_dir / "90_azbench_emulator.cfg").write_text(json.dumps({
        "datasource_list": ["NoCloud"],
        "network": {"config": "disabled"},
        "system_info": {"default_user": {"name": cfg["admin_user"], "lock_passwd": True,
                                         "groups": ["adm", "sudo"], "shell": "/bin/bash",
                                         "sudo": ["ALL=(ALL) NOPASSWD:ALL"]}},
        **module_lists()}, indent=1))


def module_lists() -> dict[str, list[str]]:
    """The image's module lists (cloud.cfg), kept to MODULES, in the image's order."""
    import yaml  # the system Python's (cloud-init depends on it)
    base = yaml.safe_load(Path("/etc/cloud/cloud.cfg").read_text())
    out = {}
    for key in ("cloud_init_modules", "cloud_config_modules", "cloud_final_modules"):
        names = [m if isinstance(m, str) else m[0] for m in base.get(key, [])]
        out[key] = [m for m in names if m in MODULES]
    return out


def stand_in_python(cfg: dict) -> None:
    """The host's Python environment stands in for the one the head's cloud-init would install."""
    if cfg["hostname"].endswith("-head"):
        target = Path("/shared/azbench")
        target.mkdir(parents=True, exist_ok=True)
        (target / "python").symlink_to(cfg["python_env"])
        # and for the expiry agent's venv (azure-identity, azure-mgmt-resource: azbench's own)
        Path("/opt/azbench-expiry").symlink_to(cfg["python_env"])
    real = os.path.realpath(Path(cfg["python_env"]) / "bin" / "python")
    if real.startswith("/root/"):  # a pyenv under root's home: let the admin user's jobs reach it
        os.chmod("/root", 0o711)


def report(vdir: Path, **state: object) -> None:
    tmp = vdir / "boot.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(vdir / "boot.json")


def boot(vdir: Path, cfg: dict) -> None:
    env = {**os.environ, "HWLOC_SYNTHETIC": cfg["hwloc"]}
    for stage, argv in STAGES:
        report(vdir, stage=stage, rc=None)
        out = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        with open("/var/log/azbench-emulator-boot.log", "a") as log:
            log.write(f"== {stage}: {' '.join(argv)} -> {out.returncode}\n{out.stdout}{out.stderr}")
        if out.returncode != 0:
            report(vdir, stage=stage, rc=out.returncode, detail=(out.stderr or out.stdout).strip()[-2000:])
            return
    report(vdir, stage="done", rc=0)


def main() -> None:
    vdir = Path(sys.argv[1])
    cfg = json.loads((vdir / "vm.json").read_text())
    os.environ["HWLOC_SYNTHETIC"] = cfg["hwloc"]
    try:
        vdir = mount_private(cfg)
        sh("hostname", "localhost")
        seed(vdir, cfg)
        stand_in_python(cfg)
    except Exception as exc:  # noqa: BLE001 - the emulator reads boot.json, not a traceback
        report(vdir, stage="emulator", rc=1, detail=str(exc))
        raise
    boot(vdir, cfg)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:  # PID 1: reap orphans (daemons the shims started double-fork to us)
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(1)


if __name__ == "__main__":
    main()
