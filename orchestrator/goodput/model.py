"""The typed breakdowns goodput returns: categories in seconds that add up to the wall time, their
cost and GPU-hours, the spans behind them, failures with their class and evidence, and the causes
of lost time ranked by GPU-hours.

Category names are fixed (RUN_CATEGORIES, CLUSTER_CATEGORIES): every breakdown lists each of its
categories, zeros included, in this order. RUN_SOURCES and CLUSTER_SOURCES say where each
category's seconds come from.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from orchestrator.models import Frozen

UNATTRIBUTED = "unattributed"
TRAINING = "training"
LOST_WORK = "lost_work"
RESTART = "restart_overhead"
IDLE = "idle"
RUN_CATEGORIES = ("queued", "health_gate", "init", TRAINING, "evaluation", "checkpoint", LOST_WORK,
                  RESTART, "teardown", UNATTRIBUTED)
# A cluster's life: what it did outside runs, then its runs' categories (a run's teardown is
# `run_teardown` here, the cluster's own deletion `teardown`), then what runs left free.
CLUSTER_CATEGORIES = ("provisioning", "staging", "health_gate", "queued", "init", TRAINING,
                      "evaluation", "checkpoint", LOST_WORK, RESTART, "run_teardown", IDLE,
                      "resize_replace", "teardown", UNATTRIBUTED)
_SHARED = {
    "health_gate": "from the gate's start to the submission (store: attempts.gate_started_at, "
                   "submitted_at); on a cluster also `azbench health` (its event's span)",
    "queued": "from the submission (store: attempts.submitted_at) to the job's start (the batch "
              "script's AZBENCH_ATTEMPT_START line in train.log)",
    "init": "from the job's start to MLLOG run_start (container start, init_start..init_stop)",
    TRAINING: "MLLOG run_start to run_stop (or the last MLLOG event before a failure), less "
              "evaluation, checkpoints and lost work",
    "evaluation": "MLLOG eval_start to eval_stop",
    "checkpoint": "MLLOG azbench_checkpoint events (written by azbench recipes; a recipe that logs "
                  "none counts its checkpoints as training)",
    LOST_WORK: "from the checkpoint the next attempt resumed from (its azbench_checkpoint event; "
               "run_start when none was kept) to the failure (the attempt's last MLLOG event)",
    RESTART: "from the failure to the next attempt's run_start (to the attempt's end when nothing "
             "retried): detection, the failed job's end, backoff, the next gate, queue and init",
    UNATTRIBUTED: "time no source covers (azbench's own steps between marks, a log not fetched)",
}
# Where each category's seconds come from, as `goodput` prints it.
RUN_SOURCES: dict[str, str] = {
    **{k: v for k, v in _SHARED.items() if k != UNATTRIBUTED},
    "teardown": "from MLLOG run_stop to the attempt's end in the store (job exit, log fetch, "
                "ingest); after a failure that time is restart overhead, retried or not",
    UNATTRIBUTED: _SHARED[UNATTRIBUTED],
}
CLUSTER_SOURCES: dict[str, str] = {
    "provisioning": "from the record's creation to the `up` event (and each later `up`'s span)",
    "staging": "`azbench prepare` jobs (their events' spans)",
    **{k: v for k, v in _SHARED.items() if k != UNATTRIBUTED},
    "run_teardown": "the runs' teardown (a run's `teardown`)",
    IDLE: "the nodes no run, gate, staging, resize or teardown held while the cluster existed",
    "resize_replace": "`azbench resize` and node replacements (their events' spans)",
    "teardown": "`azbench down` (its event's span)",
    UNATTRIBUTED: _SHARED[UNATTRIBUTED],
}


class Span(Frozen):
    """One stretch of one category: in attempt `attempt`'s lane (None: the cluster's own), caused
    by the failure class `cause` (lost work and restart overhead only)."""

    category: str
    start: datetime
    end: datetime
    seconds: float
    attempt: int | None = None
    cause: str | None = None


class AttemptFailure(Frozen):
    """A failed attempt: its class (runs.failures' table, as the store recorded it), the evidence
    line, the nodes suspected, when the work stopped, and the time it cost."""

    attempt: int
    failure_class: str
    evidence: str = ""
    nodes: list[str] = Field(default_factory=list)
    at: datetime | None = None  # the last sign of work (last MLLOG event), else the attempt's end
    lost_work_s: float = 0.0
    restart_overhead_s: float = 0.0


class Cause(Frozen):
    """Lost time of one failure class over a run (or a cluster's runs), ranked by GPU-hours."""

    failure_class: str
    failures: int
    lost_work_s: float
    restart_overhead_s: float
    node_hours: float
    gpu_hours: float
    cost_usd: float | None


class AttemptGoodput(Frozen):
    """One attempt's lane: its own seconds per category and its spans."""

    attempt: int
    state: str
    job_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    resumed_from_step: int | None = None
    lost_steps: int | None = None
    excluded_nodes: list[str] = Field(default_factory=list)
    categories: dict[str, float] = Field(default_factory=dict)
    spans: list[Span] = Field(default_factory=list)
    failure: AttemptFailure | None = None


class RunGoodput(Frozen):
    """`azbench goodput RUN`: the run's wall time (first attempt's start to the last one's end, or
    now while it runs) split into RUN_CATEGORIES. `cost_usd` is empty when no price is known."""

    run_id: str
    cluster: str
    recipe: str
    benchmark: str
    nodes: int
    gpus: int
    owner: str | None = None
    state: str
    live: bool = False
    started_at: datetime | None = None
    ended_at: datetime | None = None
    wall_s: float
    categories: dict[str, float]
    cost_usd: dict[str, float]
    gpu_hours: dict[str, float]
    goodput: float
    minutes: float | None = None  # MLPerf time to train of the attempt that finished, if any
    price_per_hour_usd: float | None = None  # the run's nodes, from the cluster's record
    price_note: str = ""
    attempts: list[AttemptGoodput]
    causes: list[Cause] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class RunShare(Frozen):
    """One run inside a cluster's life."""

    run_id: str
    recipe: str
    nodes: int
    state: str
    wall_s: float
    goodput: float
    cost_usd: float | None


class ClusterGoodput(Frozen):
    """`azbench goodput --cluster NAME`: the cluster's life (its record's creation to its end, or
    now while it lives) split into CLUSTER_CATEGORIES. Seconds are weighted by the share of the
    cluster's nodes each activity held, so they add up to the wall time; `gpu_hours` and
    `cost_usd` count every node."""

    cluster: str
    provider: str
    sku: str
    nodes: int
    gpus_per_node: int
    owner: str | None = None
    state: str
    live: bool
    started_at: datetime
    ended_at: datetime
    wall_s: float
    categories: dict[str, float]
    cost_usd: dict[str, float]
    gpu_hours: dict[str, float]
    node_hours: dict[str, float]
    goodput: float
    price_per_node_hour_usd: float | None = None
    price_note: str = ""
    line: str = ""  # the one-line version `down` and the pipeline print
    runs: list[RunShare] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list)  # the cluster's own activities (not runs)
    notes: list[str] = Field(default_factory=list)


class OwnerTotal(Frozen):
    """`azbench goodput --by owner`: one owner's clusters and runs since `since`."""

    owner: str
    clusters: int
    runs: int
    cluster_hours: float
    node_hours: float
    gpu_hours: float
    cost_usd: float | None  # None: some cluster of theirs has no price
    training_node_hours: float
    goodput: float  # training node-hours / node-hours of their clusters
    unpriced: list[str] = Field(default_factory=list)  # clusters without a price
