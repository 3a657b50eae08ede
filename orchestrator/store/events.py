"""An event (one line of history about a cluster or a run) and what it records beyond its
message: one typed payload model per event kind.

An EventRow holds a `kind` and its `data`, the model `PAYLOADS` names for that
kind. Writers build the model; readers narrow with `isinstance` and read attributes, so a field
renamed here fails the type check wherever it is read. JSON stays at the SQL edge: the store
writes `Payload.to_json()` into `events.data_json` and `stored_payload` reads it back.

Rows an older azbench wrote still read: keys a model no longer has are dropped, and a kind this
azbench does not know, or data that no longer fits its kind's model, reads as `UnknownData`,
whose `raw` keeps the JSON as written, for display only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, JsonValue, SerializeAsAny, ValidationError,
                      model_validator)

from orchestrator.models import RunState, utcnow


def _as_utc(when: datetime) -> datetime:
    return when.astimezone(timezone.utc) if when.tzinfo else when.replace(tzinfo=timezone.utc)


UtcTime = Annotated[datetime, AfterValidator(_as_utc)]  # naive (an older writer's) means UTC


class Payload(BaseModel):
    """The data of one event kind. Writers get `extra="forbid"`: a misspelt field is an error,
    not a silently dropped key (stored rows drop the keys a model no longer has first)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> str | None:
        """The JSON the store writes (None: nothing to record); fields that are None are left out,
        as the writers before typed payloads left them out."""
        data = self.model_dump(mode="json", exclude_none=True)
        return json.dumps(data, sort_keys=True) if data else None


class NoData(Payload):
    """An event whose message says it all (adopt, extend, status, notes, a run's end)."""


class UnknownData(Payload):
    """Data this azbench cannot type: a kind it does not know (written by a newer azbench), or
    data that no longer fits its kind's model. `raw` is the JSON as written: display it, never
    read fields out of it."""

    raw: JsonValue = None

    def to_json(self) -> str | None:
        return None if self.raw is None else json.dumps(self.raw, sort_keys=True)


class Spanned(Payload):
    """An event that closes a span of the cluster's own activity (goodput counts it): the span
    began at `started_at` (None: written before spans were recorded)."""

    started_at: UtcTime | None = None

    def began(self, end: datetime) -> datetime | None:
        """When the span that ended at `end` (the event's time) began, or None when unknown."""
        return self.started_at


class UpData(Spanned):
    """`up` created or completed the cluster."""


class DownData(Spanned):
    """`down` deleted the cluster (a sweep records none of the span)."""


class FailedData(Spanned):
    """An `up`, `down`, `extend` or `resize` that failed part way (kind `<verb>_failed`)."""


class ResizeData(Spanned):
    """`resize` changed the node count from `before` to `after` (None in rows written before
    the counts were recorded: the message "B -> A nodes" says them)."""

    before: int | None = None
    after: int | None = None
    removed: list[str] = []
    forced: list[str] = []


class PrepareData(Spanned):
    """`prepare`'s staging job (goodput counts its span as staging)."""

    job_id: str | None = None
    state: str | None = None


class HealthData(Spanned):
    """`azbench health`'s gate over the cluster: how long it took and the nodes it drained."""

    seconds: float | None = None
    drained: list[str] = []

    def began(self, end: datetime) -> datetime | None:
        if self.started_at is not None or self.seconds is None or self.seconds < 0:
            return self.started_at
        return end - timedelta(seconds=self.seconds)


class NodeReplacedData(Spanned):
    """A drained node replaced by a fresh one (runs.fleet_replace): `status` is "replaced",
    "failed" or "gate-failed", `gate` why the new node failed its gate ("" when it passed)."""

    node: str
    new_node: str | None = None
    reason: str = ""
    seconds: float = 0.0
    cost_usd: float | None = None
    status: str = ""
    gate: str = ""

    def began(self, end: datetime) -> datetime | None:
        if self.started_at is not None or self.seconds < 0:
            return self.started_at
        return end - timedelta(seconds=self.seconds)


class ReplaceCappedData(Payload):
    """Drained nodes left drained: the replacement caps were reached."""

    nodes: list[str] = []


class HostReportData(Payload):
    """A node reported to the cloud as faulty: `status` "reported", "skipped" or "failed"."""

    node: str
    status: str
    detail: str = ""
    category: str | None = None


class StageRecord(Payload):
    """One stage of a pipeline (pipelines.progress fills it in as the stage runs; its event
    records it when the stage ends)."""

    model_config = ConfigDict(frozen=False, extra="forbid")

    stage: str
    cluster: str | None = None
    status: Literal["ok", "failed", "skipped", "interrupted"] = "ok"
    seconds: float = 0.0
    message: str = ""


class StragglerData(Payload):
    """A node whose compute time per step exceeds the run's median by more than the tolerance."""

    node: str
    value: float
    threshold: float
    median: float


class GateData(Payload):
    """A run's pre-attempt health gate: `failed` maps node -> why; the all-reduce's bandwidth."""

    failed: dict[str, str] = {}
    busbw_gbps: float | None = None
    job_id: str | None = None


class FleetGateData(Payload):
    """`azbench health`'s checks before an attempt: the nodes they drained."""

    drained: list[str] = []


class RetryData(Payload):
    """A failed attempt retried: its failure class and the nodes suspected."""

    failure: str
    suspects: list[str] = []


class SpotRestoreData(Payload):
    """Evicted spot nodes: capacity restored (`hosts`, the new hosts) and `nodes` resumed."""

    nodes: list[str] = []
    hosts: list[str] = []


# The payload model of every kind this azbench writes. A new kind is added here, or its events
# cannot be written (EventRow refuses a kind it does not know, unless its data is UnknownData).
PAYLOADS: dict[str, type[Payload]] = {
    "up": UpData,
    "down": DownData,
    **{f"{verb}_failed": FailedData for verb in ("up", "down", "extend", "resize")},
    "resize": ResizeData,
    "prepare": PrepareData,
    "health": HealthData,
    "node_replaced": NodeReplacedData,
    "replace_capped": ReplaceCappedData,
    "host_reported": HostReportData,
    "pipeline": StageRecord,
    "straggler": StragglerData,
    "health_gate": GateData,
    "health_fleet": FleetGateData,
    "retry": RetryData,
    "spot_restore": SpotRestoreData,
    **dict.fromkeys(("up_interference", "resize_note", "adopt", "status", "extend"), NoData),
    **{f"run_{state.value}": NoData for state in RunState},
}


def payload_model(kind: str) -> type[Payload] | None:
    """The model of `kind`'s data, or None for a kind this azbench does not know."""
    return PAYLOADS.get(kind)


def stored_payload(kind: str, text: str | None) -> Payload:
    """The typed data of a stored event (`events.data_json` as written, None: none), accepting
    what any azbench wrote: unknown keys dropped, the rest as UnknownData (see the docstring)."""
    try:
        raw: JsonValue = json.loads(text) if text else None
    except ValueError:  # not JSON at all: kept as the text it is
        return UnknownData(raw=text)
    model = payload_model(kind)
    if model is None or not isinstance(raw, dict | None):
        return UnknownData(raw=raw)
    fields = {k: v for k, v in (raw or {}).items() if k in model.model_fields}
    try:
        return model.model_validate(fields)
    except ValidationError:
        return UnknownData(raw=raw)


class EventRow(BaseModel):
    """One line of history (state change, retry, warning) about a cluster or a run. `data` is
    the payload model store.events.PAYLOADS names for `kind` (a dict given for it is validated
    into that model); a kind this azbench does not know holds UnknownData."""

    model_config = ConfigDict(extra="forbid")

    id: int | None = None
    ts: datetime = Field(default_factory=utcnow)
    cluster: str | None = None
    run_id: str | None = None
    kind: str
    message: str = ""
    data: SerializeAsAny[Payload] = Field(default_factory=NoData)

    @model_validator(mode="before")
    @classmethod
    def _typed_data(cls, values: object) -> object:
        """No data, or a dict of it, becomes the payload model of the event's kind."""
        if not isinstance(values, Mapping):
            return values
        data = values.get("data")
        if data is None or isinstance(data, Mapping):
            model = payload_model(str(values.get("kind")))
            typed = UnknownData(raw=dict(data) if data else None) if model is None else \
                model.model_validate(data or {})
            return {**values, "data": typed}
        return values

    @model_validator(mode="after")
    def _data_fits_kind(self) -> EventRow:
        model = payload_model(self.kind)
        if not isinstance(self.data, UnknownData) and (model is None or not isinstance(self.data, model)):
            want = f"records {model.__name__}" if model is not None else "is not a known event kind"
            raise ValueError(f"event kind '{self.kind}' {want}, not {type(self.data).__name__}")
        return self
