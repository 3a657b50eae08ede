"""Create-or-adopt and delete one Azure resource through its long-running operation (LRO).

`ensure` adopts a resource that already exists (no PUT), resumes an in-flight create from the
continuation token a crashed run persisted (`TokenStore`, in the cluster dir), waits on one still
being created without a token, and otherwise PUTs and persists the token before reporting
progress. The token is dropped only once the operation ended (succeeded, or failed for good): a
poll answered 429 past the throttling budget, 5xx or a dropped connection keeps it, so the
operation is resumed (in this run up to MAX_RESUMES times, else by the rerun), never PUT again.
`Reporter` serialises progress callbacks across worker threads and turns an exception raised by
one (a crash, in tests) into an abort that stops every other worker before its next request.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from orchestrator.providers.azure.clients import AzureClients, Operation
from orchestrator.providers.azure.records import ArmResource
from orchestrator.providers.azure.resources import RG
from orchestrator.providers.azure_shared.errors import (
    ArmErrorClass,
    ThrottleBudgetSpent,
    arm_call,
    arm_error,
    is_not_found,
    is_resumable,
)
from orchestrator.errors import LostRaceError, ProvisionError
from orchestrator.providers.azure_shared.errors import AzureProvisionError

MAX_RESUMES = 3
DELETE_WAIT_S = 3600.0  # how long a delete waits for a group another client is deleting
TRANSITIONAL = frozenset({"Creating", "Updating", "Accepted", "Deleting", "Migrating"})


@dataclass(frozen=True)
class ProgressEvent:
    """One step of `up`/`down`: action is exists | creating | resumed | waiting | created |
    retry | deleting | deleted."""

    action: str
    kind: str
    name: str
    detail: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


class Aborted(Exception):
    """Another worker failed (or the progress callback raised): stop before the next request."""


class Reporter:
    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.abort = threading.Event()
        self._lock = threading.Lock()

    def check(self) -> None:
        if self.abort.is_set():
            raise Aborted()

    def emit(self, action: str, kind: str, name: str, detail: str = "") -> None:
        self.check()
        if self.callback is None:
            return
        with self._lock:
            try:
                self.callback(ProgressEvent(action, kind.rsplit("/", 1)[-1], name, detail))
            except BaseException:
                self.abort.set()
                raise


class TokenStore:
    """Continuation tokens of in-flight creates, keyed 'kind/name', in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._read().get(key)

    def put(self, key: str, token: str) -> None:
        self._update(lambda d: d.__setitem__(key, token))

    def drop(self, key: str) -> None:
        self._update(lambda d: d.pop(key, None))

    def clear(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)

    def pending(self) -> bool:
        """Whether any create is still in flight (an earlier run stopped before it finished)."""
        with self._lock:
            return bool(self._read())

    def _read(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _update(self, change: Callable[[dict[str, str]], object]) -> None:
        with self._lock:
            data = self._read()
            change(data)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self.path)


def observe(clients: AzureClients, rg: str, kind: str, name: str) -> ArmResource | None:
    """The resource as ARM has it now, or None when it does not exist."""
    with arm_call(f"read {kind} {name}"):
        try:
            return clients.read_resource(rg, kind, name)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise


def ensure(clients: AzureClients, rg: str, kind: str, name: str, body: Callable[[], object], *,
           seen: ArmResource | None, tokens: TokenStore, report: Reporter, cluster: str = "") -> ArmResource:
    """Adopt, resume or create `kind/name` (`body` builds its request body); the resource as it
    ended. Raises azbench errors (a resource group someone else created first: LostRaceError
    saying `cluster`'s name is taken)."""
    key = f"{kind}/{name}"
    if kind == RG:
        return _ensure_group(clients, name, body, seen, report, cluster)
    if seen is not None and seen.state == "Succeeded":
        tokens.drop(key)
        report.emit("exists", kind, name)
        return seen
    token: str | None = tokens.get(key)
    with arm_call(f"create {kind.rsplit('/', 1)[-1]} {name}"):
        if token and (seen is None or seen.state in TRANSITIONAL):
            report.emit("resumed", kind, name)
            operation = clients.resume_create(rg, kind, name, token)
        elif seen is not None and seen.state in TRANSITIONAL:
            report.emit("waiting", kind, name, seen.state)
            return _wait_terminal(clients, rg, kind, name, report)
        else:
            report.check()
            operation = clients.begin_create(rg, kind, name, body())
            token = operation.continuation_token()
            tokens.put(key, token)
            report.emit("creating", kind, name)
        try:
            result = _finish(clients, rg, kind, name, operation, token or "", report)
        except Aborted:
            raise  # the operation runs on: a rerun resumes it
        except Exception as exc:
            if not is_resumable(exc):
                tokens.drop(key)  # it ended (failed for good): a rerun PUTs afresh
            raise
        tokens.drop(key)
    report.emit("created", kind, name)
    return result


def _finish(clients: AzureClients, rg: str, kind: str, name: str, operation: Operation[ArmResource], token: str,
            report: Reporter) -> ArmResource:
    """The operation's result. After a poll that failed with a 5xx or a dropped connection (the
    operation itself may still be running) the operation is resumed from its continuation token,
    up to MAX_RESUMES times; the token stays saved for a rerun whenever the failure is resumable
    (a throttling budget spent included). Only a terminal failure lets the caller drop it."""
    for attempt in range(MAX_RESUMES + 1):
        try:
            _wait(operation, report, clients.polling_interval)
            return operation.result()
        except ThrottleBudgetSpent:
            raise
        except Exception as exc:
            if not (token and is_resumable(exc)) or attempt == MAX_RESUMES:
                raise
            report.emit("resumed", "operation", name, f"after {type(exc).__name__}")
            operation = clients.resume_create(rg, kind, name, token)
    raise AssertionError("unreachable")


def delete(clients: AzureClients, rg: str, kind: str, name: str, report: Reporter | None = None,
           *, wait_s: float = DELETE_WAIT_S) -> None:
    """Delete `kind/name` and wait; a resource already gone (any 404) is success, and so is a
    resource group another client is deleting (409 ResourceGroupBeingDeleted): this waits,
    at most `wait_s`, until it is gone."""
    if report:
        report.emit("deleting", kind, name)
    being_deleted = False
    with arm_call(f"delete {kind.rsplit('/', 1)[-1]} {name}"):
        for attempt in range(MAX_RESUMES + 1):
            try:
                clients.begin_remove(rg, kind, name).result()
                break
            except ThrottleBudgetSpent:
                raise
            except Exception as exc:
                being_deleted = kind == RG and arm_error(exc).cls == ArmErrorClass.DELETING
                if is_not_found(exc) or being_deleted:
                    break
                # A poll that failed past azure-core's retries (5xx, a dropped connection): the
                # delete may run on. DELETE is idempotent: ask again (a group then answers 409
                # ResourceGroupBeingDeleted, and is waited for, or 404).
                if not is_resumable(exc) or attempt == MAX_RESUMES:
                    raise
                if report:
                    report.emit("retry", kind, name, f"after {type(exc).__name__}")
    if being_deleted:
        if report:
            report.emit("waiting", kind, name, "already being deleted")
        wait_gone(clients, name, wait_s)
    if report:
        report.emit("deleted", kind, name)


def wait_gone(clients: AzureClients, group: str, wait_s: float = DELETE_WAIT_S,
              sleep: Callable[[float], None] = time.sleep) -> None:
    """Until resource group `group` reads 404 (ARM's sign that a delete finished,
    https://learn.microsoft.com/azure/azure-resource-manager/management/delete-resource-group,
    "After deletion"): read at once, then after 1, 2, 4 ... s, at most the polling interval
    apart. ProvisionError when it is still there after `wait_s`."""
    deadline = time.monotonic() + wait_s
    pause = 1.0
    while True:
        seen = observe(clients, "", RG, group)
        if seen is None:
            return
        if time.monotonic() >= deadline:
            raise ProvisionError(f"resource group {group} is still {seen.state or 'there'} after {wait_s:.0f} s",
                                 hint="rerun `azbench down` later; check the portal")
        sleep(min(pause, clients.polling_interval))
        pause *= 2


def _ensure_group(clients: AzureClients, name: str, body: Callable[[], object], seen: ArmResource | None,
                  report: Reporter, cluster: str = "") -> ArmResource:
    """Create the group this `up` read as absent. ARM answers the PUT 201 Created to the request
    that created the group and 200 OK to one that found it there
    (https://learn.microsoft.com/rest/api/resources/resource-groups/create-or-update, Responses),
    and that is the proof of creation: no read before the PUT can close the window in which
    another client (a concurrent `up` of the same name) creates it, and ARM offers no
    `If-None-Match: *` on groups (testsupport/fake_arm.py `_put` cites why). On 200 this `up`
    stops (LostRaceError) before it writes anything else and never claims the other's
    resources; its PUT may have replaced the group's tags, which the winner restores
    (up.UpRun._restore_tags)."""
    if seen is not None:
        report.emit("exists", RG, name)
        return seen
    report.check()
    with arm_call(f"create resource group {name}"):
        status, group = clients.create_group(name, body())
    if status != 201:
        if not _holds_anything(clients, name):
            # Nothing inside yet: the 200 may answer this `up`'s own retried PUT (the 201 of the
            # first one lost to a 500 or a dropped connection after ARM made the group), or a
            # same-name `up` that made it moments ago. No evidence tells them apart yet: say both.
            raise LostRaceError(
                f"resource group {name}: ARM answered 200, not 201 Created, and the group holds nothing yet: "
                f"either this `up`'s own first request created it and its 201 was lost (a failed or dropped "
                f"response the SDK retried), or another `azbench up` of '{cluster or name}' created it moments "
                "ago; this one stopped before writing anything else",
                hint=f"if no other `azbench up` of '{cluster or name}' is running, rerun `azbench up`: it takes an "
                     "empty group whose owner tags name you; if one is, let it finish (`azbench status` then "
                     "says whose it is)")
        taken = f"the name '{cluster}' is taken" if cluster else f"the resource group name {name} is taken"
        raise LostRaceError(f"{taken}: resource group {name} was created by another `azbench up` while this one "
                            f"ran (ARM answered 200, not 201 Created, and the group already holds that run's "
                            f"resources); this one stopped before writing anything else",
                            hint="the resources are the other run's: pick another name, and never `azbench down` "
                                 "them from this home")
    report.emit("created", RG, name)
    return group


def _holds_anything(clients: AzureClients, rg: str) -> bool:
    """Whether group `rg` holds any resource (one listing; a read, so a loser writes nothing).
    True when the listing fails: then the race-loss message, which sends no one to write."""
    try:
        with arm_call(f"list resource group {rg}"):
            return bool(clients.group_contents(rg))
    except Exception:  # noqa: BLE001 - the answer only picks the message
        return True


def _wait(operation: Operation[ArmResource], report: Reporter, interval: float) -> None:
    # Wake up now and then so an abort (another worker failed, or a crash) stops this wait too;
    # the continuation token stays saved, so a rerun resumes the operation.
    while not operation.done():
        report.check()
        operation.wait(max(0.05, min(5.0, interval)))


def _wait_terminal(clients: AzureClients, rg: str, kind: str, name: str, report: Reporter) -> ArmResource:
    # No token (the crash came between PUT and saving it): poll the resource itself, reading it
    # first (a rerun long after the kill finds it done at once) and then every polling interval.
    while True:
        report.check()
        seen = observe(clients, rg, kind, name)
        if seen is None or seen.state not in TRANSITIONAL:
            break
        time.sleep(clients.polling_interval)
    if seen is None or seen.state != "Succeeded":
        raise AzureProvisionError(f"{kind} {name} ended {seen.state if seen else 'deleted'} while azbench waited")
    report.emit("created", kind, name)
    return seen

