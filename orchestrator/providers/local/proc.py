"""Process plumbing for the local provider: start daemons, recognise them later, stop them.

A pid alone is not an identity (pids are recycled), so every record pairs the pid with the
kernel's start time from /proc/<pid>/stat; a zombie counts as dead. Job steps (slurmstepd) are
found by a marker variable that slurmd passes on to them in their environment.
"""

from __future__ import annotations

import ctypes
import os
import random
import select
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from collections.abc import Collection
from typing import Callable

CLUSTER_MARKER = "AZBENCH_LOCAL_CLUSTER"
NODE_MARKER = "AZBENCH_LOCAL_NODE"

# Popen objects of the daemons this process started, so that stopping them also reaps them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def spawn(argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """Start a foreground daemon in its own session, output appended to `log`: (pid, start time)."""
    with open(log, "ab") as out:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                 start_new_session=True)
    _CHILDREN[child.pid] = child
    return child.pid, start_time(child.pid) or 0


def start_time(pid: int) -> int | None:
    """Kernel start time (clock ticks since boot) of a live, non-zombie process; else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        _reap(pid)
        return None
    return int(fields[19])


def alive(pid: int, started: int) -> bool:
    return start_time(pid) == started


def terminate(records: list[tuple[int, int]], grace_s: float) -> None:
    """SIGTERM each live (pid, start time), SIGKILL what is left after `grace_s`."""
    live = [(pid, st) for pid, st in records if alive(pid, st)]
    if grace_s > 0:
        for pid, _ in live:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(alive(p, s) for p, s in live):
            time.sleep(0.05)
    for pid, st in live:
        if alive(pid, st):
            _kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(p, s) for p, s in live):
        time.sleep(0.02)


def step_pids(marker_prefix: str, *, exact: bool = False) -> list[int]:
    """Pids of slurmstepd processes whose NODE_MARKER starts with (or equals) `marker_prefix`,
    followed by every descendant (the job's tasks)."""
    steps = []
    for pid, name in _processes():
        if name != "slurmstepd":
            continue
        value = _environ(pid).get(NODE_MARKER)
        if value is not None and (value == marker_prefix if exact else value.startswith(marker_prefix)):
            steps.append(pid)
    return steps + descendants(steps)


def descendants(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, _ in _processes():
        ppid = _ppid(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all held open while choosing)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


# Port blocks come from below Linux's ephemeral range and clear of the ports runs use
# (20000-32699, see templates/*.j2), so that a block is not taken by outgoing connections.
PORT_BLOCK_RANGE = (10000, 20000)


def free_port_block(count: int, tries: int = 64) -> list[int]:
    """`count` consecutive TCP ports on 127.0.0.1 with nothing listening (checked by binding
    each, as slurmd will, with SO_REUSEADDR); a random start per try."""
    low, high = PORT_BLOCK_RANGE
    if count > high - low:
        raise OSError(f"no block of {count} ports fits in {low}-{high}")
    for _ in range(tries):
        start = random.randrange(low, high - count + 1)
        if _bindable(range(start, start + count)):
            return list(range(start, start + count))
    raise OSError(f"no free block of {count} consecutive ports in {low}-{high}")


def _bindable(ports: range) -> bool:
    socks = []
    try:
        for port in ports:
            sock = socket.socket()
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for sock in socks:
            sock.close()


def wait_for(done: Callable[[], bool], timeout_s: float, poll_s: float,
             check: Callable[[], None], what: str, *, max_poll_s: float | None = None) -> None:
    """Poll `done` until true; `check` may raise to stop early. TimeoutError(what) at the end.
    With `max_poll_s`, the pause doubles after each miss up to that cap (for a `done` that asks
    a daemon, so a slow machine is asked fewer times, not more)."""
    deadline = time.monotonic() + timeout_s
    pause = poll_s
    while True:
        if done():
            return
        check()
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(what)
        time.sleep(min(pause, max(deadline - now, 0.0)))
        if max_poll_s is not None:
            pause = min(pause * 2, max_poll_s)


def listening(ports: Collection[int]) -> set[int]:
    """Which of `ports` have a TCP socket listening on this host, read from the kernel's socket
    tables (/proc/net/tcp and tcp6: state 0A is LISTEN, proc(5)) rather than by connecting, so
    the daemon behind each port is not disturbed. One read covers every port."""
    wanted, found = set(ports), set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split(None, 4)
            if len(fields) > 3 and fields[3] == "0A":
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if port in wanted:
                    found.add(port)
    return found


class DirWatch:
    """Wakes a waiter when a file in one directory is created or written: Linux inotify
    (inotify(7): IN_CREATE, IN_MODIFY) through libc, so that waiting for many daemons' pid files
    costs one wake-up per write instead of a poll every few milliseconds. Where inotify is not
    available, `wait` just sleeps its timeout (the caller re-checks either way)."""

    _IN_CREATE, _IN_MODIFY, _IN_NONBLOCK, _IN_CLOEXEC = 0x100, 0x2, 0o4000, 0o2000000

    def __init__(self, directory: Path) -> None:
        self.fd = -1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(self._IN_NONBLOCK | self._IN_CLOEXEC)
            if fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(directory),
                                                  self._IN_CREATE | self._IN_MODIFY) < 0:
                os.close(fd)
                fd = -1
            self.fd = fd
        except (OSError, AttributeError):
            self.fd = -1

    def wait(self, timeout_s: float) -> set[str] | None:
        """After the next events (at once if some are pending), the names of the files they
        concern; an empty set after `timeout_s` with none; None where there is no inotify (the
        caller then checks every file)."""
        if self.fd < 0:
            time.sleep(timeout_s)
            return None
        names: set[str] = set()
        if select.select([self.fd], [], [], timeout_s)[0]:
            try:
                while data := os.read(self.fd, 65536):
                    offset = 0
                    while offset + 16 <= len(data):  # struct inotify_event: wd, mask, cookie, len, name
                        _, _, _, size = struct.unpack_from("iIII", data, offset)
                        name = data[offset + 16:offset + 16 + size].rstrip(b"\0")
                        names.add(os.fsdecode(name))
                        offset += 16 + size
            except BlockingIOError:
                pass
        return names

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def pidfile_names(path: Path, pid: int) -> bool:
    """Whether the pid file at `path` exists and holds `pid` (a stale one from an earlier daemon
    holds another number)."""
    try:
        return path.read_text().strip() == str(pid)
    except OSError:
        return False


def tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"  ({path} is missing)"
    return "\n".join("  " + line for line in text[-lines:]) or f"  ({path} is empty)"


def _processes() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), (entry / "comm").read_text().strip()))
            except OSError:
                continue
    return found


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.poll()
