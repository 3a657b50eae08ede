"""Test doubles shared by the test suites: a stateful FakeRunner with scripted answers.

FakeRunner keeps a full call history, answers `run` from rules matched by command prefix or
regex (newest rule first), keeps an in-memory remote filesystem for put/get, and has failure
switches (`fail_next`) that make the next calls raise RemoteError like an unreachable host.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from orchestrator.errors import RemoteError
from orchestrator.models import ExecResult

Responder = ExecResult | Callable[[str], ExecResult]
# Commands may start with "export K=V; " segments (a cluster's env); prefix rules skip them.
_EXPORTS = re.compile(r"""^(?:export [A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"[^"]*"|[^;\s'"]+)*; )*""")


@dataclass
class Call:
    """One call made on the runner: kind is "run", "put", "get" or "read"."""

    kind: str
    cmd: str = ""
    local: Path | None = None
    remote: str = ""
    timeout: float | None = None


@dataclass
class Rule:
    pattern: re.Pattern[str]
    respond: Responder
    times: int | None = None  # None: forever
    used: int = 0

    def matches(self, cmd: str) -> bool:
        return self.times != 0 and bool(self.pattern.search(cmd))


@dataclass
class FakeRunner:
    """A Runner for tests. Unmatched commands answer exit 127, as a shell would."""

    calls: list[Call] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    strict: bool = False
    closed: bool = False
    _failures: list[tuple[int, RemoteError, frozenset[str]]] = field(default_factory=list)

    # -- scripting -------------------------------------------------------------------------

    def on(self, prefix: str, stdout: str = "", stderr: str = "", exit_code: int = 0, *,
           times: int | None = None, respond: Callable[[str], ExecResult] | None = None) -> Rule:
        """Answer commands starting with `prefix` (after any `export ...;` segments)."""
        pattern = re.compile(_EXPORTS.pattern + re.escape(prefix))
        return self._add(pattern, respond or ExecResult(exit_code=exit_code, stdout=stdout, stderr=stderr), times)

    def on_regex(self, regex: str, stdout: str = "", stderr: str = "", exit_code: int = 0, *,
                 times: int | None = None, respond: Callable[[str], ExecResult] | None = None) -> Rule:
        """Answer commands in which `regex` is found (re.search)."""
        return self._add(re.compile(regex), respond or ExecResult(exit_code=exit_code, stdout=stdout,
                                                                   stderr=stderr), times)

    def fail_next(self, n: int = 1, message: str = "fake: host unreachable",
                  kinds: Sequence[str] = ("run", "put", "get", "read")) -> None:
        """The next `n` calls of the given kinds raise RemoteError(message)."""
        self._failures.append((n, RemoteError(message), frozenset(kinds)))

    # -- Runner protocol -------------------------------------------------------------------

    def run(self, cmd: str | Sequence[str], timeout: float = 60.0) -> ExecResult:
        text = cmd if isinstance(cmd, str) else shlex.join(cmd)
        self.calls.append(Call("run", cmd=text, timeout=timeout))
        self._maybe_fail("run")
        for rule in reversed(self.rules):
            if rule.matches(text):
                rule.used += 1
                if rule.times is not None:
                    rule.times -= 1
                return rule.respond(text) if callable(rule.respond) else rule.respond
        if self.strict:
            raise AssertionError(f"FakeRunner: no rule for {text!r}")
        return ExecResult(exit_code=127, stderr=f"fake: no rule for {text}")

    def put(self, local: Path, remote: str) -> None:
        self.calls.append(Call("put", local=local, remote=remote))
        self._maybe_fail("put")
        if local.is_dir():
            for path in sorted(local.rglob("*")):
                if path.is_file():
                    self.files[f"{remote.rstrip('/')}/{path.relative_to(local).as_posix()}"] = path.read_bytes()
        else:
            self.files[remote] = local.read_bytes()

    def get(self, remote: str, local: Path) -> None:
        self.calls.append(Call("get", local=local, remote=remote))
        self._maybe_fail("get")
        if remote not in self.files:
            raise RemoteError(f"fake: no such remote file {remote}")
        local.write_bytes(self.files[remote])

    def read(self, remote: str, offset: int = 0, limit: int | None = None) -> bytes:
        self.calls.append(Call("read", remote=remote))
        self._maybe_fail("read")
        data = self.files.get(remote, b"")
        start = max(len(data) + offset, 0) if offset < 0 else offset
        return data[start:] if limit is None else data[start:start + limit]

    def close(self) -> None:
        self.closed = True

    # -- inspection ------------------------------------------------------------------------

    @property
    def commands(self) -> list[str]:
        return [call.cmd for call in self.calls if call.kind == "run"]

    def count(self, regex: str) -> int:
        """How many run commands matched `regex`."""
        return sum(1 for cmd in self.commands if re.search(regex, cmd))

    def _add(self, pattern: re.Pattern[str], respond: Responder, times: int | None) -> Rule:
        rule = Rule(pattern, respond, times)
        self.rules.append(rule)
        return rule

    def _maybe_fail(self, kind: str) -> None:
        for index, (left, error, kinds) in enumerate(self._failures):
            if left > 0 and kind in kinds:
                self._failures[index] = (left - 1, error, kinds)
                raise error
