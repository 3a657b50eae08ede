"""Running commands on cluster hosts: LocalRunner and SshRunner (the Runner seam is in seams.py).

Contract: `run` never raises for a non-zero exit (that is data in ExecResult); it raises
RemoteError when the host cannot be reached, the host key is wrong, or the timeout passes.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

from orchestrator.backends import require_extra
from orchestrator.errors import RemoteError
from orchestrator.models import ExecResult, SshTarget
from orchestrator.seams import command_line

if TYPE_CHECKING:  # paramiko and tenacity load on first SSH use: `azbench --help` stays fast
    import paramiko

log = logging.getLogger(__name__)


def _quiet_paramiko() -> None:
    """paramiko's transport thread logs a failed handshake (e.g. "Error reading SSH protocol
    banner") with its traceback at ERROR; with no handler anywhere, Python's last-resort handler
    printed that traceback on stderr before azbench's one-line RemoteError. A NullHandler keeps
    it off the console; records still propagate to any handler the application installs."""
    paramiko_log = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in paramiko_log.handlers):
        paramiko_log.addHandler(logging.NullHandler())


class LocalRunner:
    """Runs commands on this machine through `bash -c`; put/get are plain copies."""

    def __init__(self, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.env = dict(env or {})
        self.cwd = cwd

    def run(self, cmd: str | Sequence[str], timeout: float = 60.0) -> ExecResult:
        text = cmd if isinstance(cmd, str) else shlex.join(cmd)
        # A new session lets a timeout kill the whole process group, grandchildren included.
        proc = subprocess.Popen(["bash", "-c", text], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, **self.env}, cwd=self.cwd,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RemoteError(f"local command timed out after {timeout:g} s: {_short(text)}") from None
        return ExecResult(exit_code=proc.returncode, stdout=out.decode(errors="replace"),
                          stderr=err.decode(errors="replace"))

    def put(self, local: Path, remote: str) -> None:
        _copy(Path(local), Path(remote))

    def get(self, remote: str, local: Path) -> None:
        _copy(Path(remote), Path(local))

    def read(self, remote: str, offset: int = 0, limit: int | None = None) -> bytes:
        try:
            with open(remote, "rb") as handle:
                return _read_range(handle, os.fstat(handle.fileno()).st_size, offset, limit)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise RemoteError(f"cannot read {remote}: {_reason(exc)}") from None

    def close(self) -> None:
        return None


class SshRunner:
    """One persistent paramiko connection (pinned host key, key auth only) reused by every call.

    A dropped transport is reopened on the next call with a few bounded attempts;
    `connections_opened` counts successful connections (for benchmarks and tests).
    """

    def __init__(self, target: SshTarget, env: dict[str, str] | None = None,
                 connect_timeout: float = 10.0, keepalive: int = 15, *,
                 connect_attempts: int = 4) -> None:
        require_extra("ssh")  # paramiko is the [ssh] extra: say so before the first connection
        self.target = target
        self.env = dict(env or {})
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self.connect_attempts = connect_attempts
        self.connections_opened = 0
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()

    @property
    def url(self) -> str:
        return f"ssh://{self.target.user}@{self.target.host}:{self.target.port}"

    def run(self, cmd: str | Sequence[str], timeout: float = 60.0) -> ExecResult:
        text = command_line(cmd, self.env)
        chan = self._open_channel()
        try:
            chan.exec_command(text)
            chan.shutdown_write()
            return _collect(chan, timeout, f"{self.url}: command timed out after {timeout:g} s: "
                                           f"{_short(cmd if isinstance(cmd, str) else shlex.join(cmd))}")
        except _net_errors() as exc:
            raise RemoteError(f"{self.url}: connection lost during command: {_reason(exc)}") from None
        finally:
            chan.close()

    def put(self, local: Path, remote: str) -> None:
        local = Path(local)
        if not local.exists():
            raise RemoteError(f"cannot upload {local}: no such file or directory")
        sftp = self._sftp_client()
        try:
            if local.is_dir():
                _sftp_put_tree(sftp, local, remote)
            else:
                _sftp_mkdirs(sftp, _parent(remote))
                sftp.put(str(local), remote, confirm=True)
                sftp.chmod(remote, stat.S_IMODE(local.stat().st_mode))
        except _net_errors() as exc:
            raise RemoteError(f"{self.url}: upload of {local} to {remote} failed: {_reason(exc)}") from None

    def get(self, remote: str, local: Path) -> None:
        sftp = self._sftp_client()
        try:
            if stat.S_ISDIR(sftp.stat(remote).st_mode or 0):
                _sftp_get_tree(sftp, remote, Path(local))
            else:
                Path(local).parent.mkdir(parents=True, exist_ok=True)
                sftp.get(remote, str(local))
        except _net_errors() as exc:
            raise RemoteError(f"{self.url}: download of {remote} failed: {_reason(exc)}") from None

    def read(self, remote: str, offset: int = 0, limit: int | None = None) -> bytes:
        sftp = self._sftp_client()
        try:
            with sftp.open(remote, "rb") as handle:
                return _read_range(handle, handle.stat().st_size or 0, offset, limit)
        except FileNotFoundError:
            return b""
        except _net_errors() as exc:
            raise RemoteError(f"{self.url}: reading {remote} failed: {_reason(exc)}") from None

    def close(self) -> None:
        with self._lock:
            if self._sftp is not None:
                self._sftp.close()
            if self._client is not None:
                self._client.close()
            self._sftp = self._client = None

    def __enter__(self) -> SshRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connection management -------------------------------------------------------------

    def _open_channel(self) -> paramiko.Channel:
        # Opening a channel runs nothing remotely, so one retry on a fresh connection is safe.
        for attempt in (1, 2):
            transport = self._transport()
            try:
                return transport.open_session(timeout=self.connect_timeout)
            except _net_errors() as exc:
                self._drop()
                if attempt == 2:
                    raise RemoteError(f"{self.url}: cannot open a session: {_reason(exc)}") from None
        raise AssertionError("unreachable")

    def _sftp_client(self) -> paramiko.SFTPClient:
        import paramiko

        with self._lock:
            transport = self._transport()
            sftp = self._sftp
            channel = sftp.get_channel() if sftp is not None else None
            if sftp is None or channel is None or channel.get_transport() is not transport:
                try:
                    sftp = paramiko.SFTPClient.from_transport(transport)
                except _net_errors() as exc:
                    self._drop()
                    raise RemoteError(f"{self.url}: cannot start SFTP: {_reason(exc)}") from None
                if sftp is None:  # from_transport answers None when the channel cannot open
                    self._drop()
                    raise RemoteError(f"{self.url}: cannot start SFTP: the server refused its channel")
                self._sftp = sftp
                channel = sftp.get_channel()
            if channel is not None:
                channel.settimeout(max(self.connect_timeout, 30.0))
            return sftp

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                self._drop()
                self._client = self._connect_with_retry()
                transport = self._client.get_transport()
            assert transport is not None
            return transport

    def _drop(self) -> None:
        with self._lock:
            try:
                self.close()
            except _net_errors():
                self._sftp = self._client = None

    def _connect_with_retry(self) -> paramiko.SSHClient:
        import tenacity

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Unreachable),
            stop=tenacity.stop_after_attempt(self.connect_attempts),
            wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
            reraise=True,
        )
        try:
            return retrying(self._connect_once)
        except _Unreachable as exc:
            raise RemoteError(f"cannot reach {self.url}: {exc}") from None

    def _connect_once(self) -> paramiko.SSHClient:
        import paramiko

        client = paramiko.SSHClient()
        known = self.target.known_hosts
        try:
            client.load_host_keys(str(known))
        except (OSError, paramiko.SSHException) as exc:
            raise RemoteError(f"cannot read pinned host keys {known}: {_reason(exc)}") from None
        client.set_missing_host_key_policy(_pinned_only())
        try:
            pkey = paramiko.PKey.from_path(str(self.target.key_path))
        except (OSError, paramiko.SSHException, ValueError) as exc:
            raise RemoteError(f"cannot load SSH key {self.target.key_path}: {_reason(exc)}") from None
        _quiet_paramiko()
        try:
            client.connect(self.target.host, port=self.target.port, username=self.target.user,
                           pkey=pkey, look_for_keys=False, allow_agent=False,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout,
                           channel_timeout=self.connect_timeout)
        except Exception as exc:
            client.close()
            raise self._classify(exc) from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.keepalive)
        self.connections_opened += 1
        log.debug("connected to %s (connection %d)", self.url, self.connections_opened)
        return client

    def _classify(self, exc: Exception) -> Exception:
        import paramiko

        host = _known_hosts_name(self.target.host, self.target.port)
        if isinstance(exc, _UnpinnedHostKey):
            return RemoteError(f"host key for {host} is not pinned in {self.target.known_hosts}: "
                               "refusing to connect")
        if isinstance(exc, paramiko.BadHostKeyException):
            return RemoteError(f"host key for {host} does not match the pinned key (possible "
                               "man-in-the-middle): refusing to connect")
        if isinstance(exc, paramiko.AuthenticationException):
            return RemoteError(f"{self.url} refused the key {self.target.key_path}: "
                               f"authentication failed")
        if isinstance(exc, (OSError, EOFError, paramiko.SSHException)):
            return _Unreachable(_reason(exc))
        return exc


class _UnpinnedHostKey(Exception):
    pass


class _Unreachable(Exception):
    """A connection attempt failed in a way a retry may fix (refused, reset, timed out)."""


def _pinned_only() -> paramiko.MissingHostKeyPolicy:
    """RejectPolicy with a distinct error, so 'not pinned' reads differently from 'unreachable'."""
    import paramiko

    class PinnedOnly(paramiko.RejectPolicy):
        def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                             key: paramiko.PKey) -> NoReturn:
            raise _UnpinnedHostKey(hostname)

    return PinnedOnly()


def _net_errors() -> tuple[type[BaseException], ...]:
    import paramiko

    return (paramiko.SSHException, OSError, EOFError)


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _collect(chan: paramiko.Channel, timeout: float, timeout_message: str) -> ExecResult:
    """Read stdout and stderr until EOF and the exit status, all within one deadline."""
    deadline = time.monotonic() + timeout
    out: list[bytes] = []
    err: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RemoteError(timeout_message)
        chan.settimeout(min(remaining, 0.05))
        try:
            data = chan.recv(65536)
        except socket.timeout:
            data = None
        while chan.recv_stderr_ready():
            err.append(chan.recv_stderr(65536))
        if data:
            out.append(data)
        elif data == b"":  # EOF: every byte of both streams has arrived
            break
    if not chan.status_event.wait(max(deadline - time.monotonic(), 0.0)):
        raise RemoteError(timeout_message)
    while chan.recv_stderr_ready():
        err.append(chan.recv_stderr(65536))
    transport = chan.get_transport()
    if chan.exit_status == -1 and (transport is None or not transport.is_active()):
        raise EOFError("the transport closed before the command reported its exit status")
    return ExecResult(exit_code=chan.recv_exit_status(), stdout=b"".join(out).decode(errors="replace"),
                      stderr=b"".join(err).decode(errors="replace"))


def _read_range(handle: Any, size: int, offset: int, limit: int | None) -> bytes:
    """Bytes [offset, offset + limit) of an open file of `size` bytes; a negative offset counts
    from the end. Reads only that range, however large the file."""
    start = max(size + offset, 0) if offset < 0 else min(offset, size)
    count = size - start if limit is None else max(min(limit, size - start), 0)
    handle.seek(start)
    return handle.read(count) if count else b""


def _sftp_mkdirs(sftp: paramiko.SFTPClient, path: str) -> None:
    if path in ("", "/", "."):
        return
    try:
        if stat.S_ISDIR(sftp.stat(path).st_mode or 0):
            return
        raise OSError(f"{path} exists and is not a directory")
    except FileNotFoundError:
        _sftp_mkdirs(sftp, _parent(path))
        sftp.mkdir(path)


def _sftp_put_tree(sftp: paramiko.SFTPClient, local: Path, remote: str) -> None:
    _sftp_mkdirs(sftp, remote)
    for item in sorted(local.iterdir()):
        target = f"{remote.rstrip('/')}/{item.name}"
        if item.is_dir():
            _sftp_put_tree(sftp, item, target)
        else:
            sftp.put(str(item), target, confirm=True)
            sftp.chmod(target, stat.S_IMODE(item.stat().st_mode))


def _sftp_get_tree(sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
    local.mkdir(parents=True, exist_ok=True)
    for attr in sftp.listdir_attr(remote):
        source = f"{remote.rstrip('/')}/{attr.filename}"
        if stat.S_ISDIR(attr.st_mode or 0):
            _sftp_get_tree(sftp, source, local / attr.filename)
        else:
            sftp.get(source, str(local / attr.filename))


def _copy(source: Path, dest: Path) -> None:
    try:
        if source.is_dir():
            shutil.copytree(source, dest, dirs_exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    except OSError as exc:
        raise RemoteError(f"copy of {source} to {dest} failed: {_reason(exc)}") from None


def _parent(path: str) -> str:
    head = path.rstrip("/").rsplit("/", 1)
    return head[0] if len(head) == 2 and head[0] else ("/" if path.startswith("/") else "")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


if TYPE_CHECKING:
    from orchestrator.seams import Runner

    _CONFORM: tuple[type[Runner], ...] = (LocalRunner, SshRunner)  # proven by mypy (CI)
