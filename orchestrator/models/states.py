"""The state machines of clusters, runs and attempts: their states, the moves the store allows,
and the final states."""

from __future__ import annotations

from enum import Enum, StrEnum


class ClusterState(StrEnum):
    """A cluster's record. PROVISIONING is stored, with its plan, before `up` creates anything,
    so a crash mid-up still leaves a record that `azbench down` deletes from."""

    PROVISIONING = "provisioning"
    READY = "ready"
    FAILED = "failed"
    DELETING = "deleting"  # `down` is deleting it, or the cloud is (`status` read so: its expiry agent)
    DELETE_FAILED = "delete failed"  # a `down` stopped part way: its event says what is left; rerun `down`
    TERMINATED = "terminated"


class RunState(StrEnum):
    """A run (one recipe x nodes x repeat) across all its attempts."""

    PENDING = "pending"  # a row created outside a sweep (tools, older stores)
    QUEUED = "queued"
    HEALTH_CHECK = "health_check"
    SUBMITTING = "submitting"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AttemptState(StrEnum):
    """One scheduler job of a run."""

    WAITING = "waiting"  # its row exists (with its excluded nodes) before its gate and submit
    HEALTH_CHECK = "health_check"
    SUBMITTING = "submitting"
    PENDING = "pending"  # submitted: the scheduler has it
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


def _moves(table: dict[str, str]) -> dict[str, frozenset[str]]:
    return {k: frozenset(v.split()) for k, v in table.items()}


# The allowed transitions, state -> states it may become (staying put is always allowed). The
# store refuses any other change (store.database), so a bug that skips a step, or revives a
# finished run, fails loudly instead of recording what did not happen.
# State names with a space ("delete failed") are written with "_" here.
CLUSTER_MOVES = {k.replace("_", " "): frozenset(m.replace("_", " ") for m in v) for k, v in _moves({
    "provisioning": "ready failed deleting terminated",
    "ready": "provisioning failed deleting terminated",  # provisioning again: a rerun of `up`
    "failed": "provisioning ready deleting terminated",
    # failed: the cloud's delete stopped part way (`status`); delete_failed: `down`'s did
    "deleting": "failed delete_failed terminated",
    "delete_failed": "deleting terminated",  # only `down` goes on from a delete that failed
    "terminated": "provisioning",  # the same name brought up (or adopted) again
}).items()}
RUN_MOVES = _moves({
    "pending": "queued health_check submitting running failed cancelled",
    "queued": "health_check submitting retrying failed cancelled",
    "health_check": "submitting retrying failed cancelled",
    "submitting": "running retrying failed cancelled",
    "running": "retrying succeeded failed cancelled",
    "retrying": "health_check submitting running failed cancelled",
    "succeeded": "", "failed": "", "cancelled": "",
})
ATTEMPT_MOVES = _moves({
    "waiting": "health_check submitting failed cancelled",
    "health_check": "submitting failed cancelled",
    "submitting": "pending failed cancelled",
    "pending": "running succeeded failed cancelled",
    "running": "succeeded failed cancelled",
    "succeeded": "", "failed": "", "cancelled": "",
})


def legal_move(table: dict[str, frozenset[str]], old: str | Enum, new: str | Enum) -> bool:
    """Whether `old` may become `new` in `table` (one of the *_MOVES above)."""
    old = old.value if isinstance(old, Enum) else old
    new = new.value if isinstance(new, Enum) else new
    return old == new or new in table.get(old, frozenset())


# A run (RunRow.state) in one of these states is finished: no job of it is live any more.
FINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})
FINAL_ATTEMPT_STATES = frozenset({AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELLED})
