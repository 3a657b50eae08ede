"""Event payloads are typed end to end (store.events): every kind round-trips through the store
with every field, a misspelt or mismatched payload is refused at the writer, and rows an older
azbench wrote (as its writers wrote them, unknown keys and kinds included) still read."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from orchestrator.store.database import EventRow, Store
from orchestrator.store.events import (
    PAYLOADS,
    DownData,
    FailedData,
    FleetGateData,
    GateData,
    HealthData,
    HostReportData,
    NoData,
    NodeReplacedData,
    Payload,
    PrepareData,
    ReplaceCappedData,
    ResizeData,
    RetryData,
    SpotRestoreData,
    StageRecord,
    StragglerData,
    UnknownData,
    UpData,
)

UTC = timezone.utc
T0 = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

# One payload per model, every field set to a value other than its default: a field dropped from
# a model fails its construction, and a field added without a sample here fails the coverage test.
SAMPLES: dict[type[Payload], Payload] = {
    NoData: NoData(),
    UpData: UpData(started_at=T0),
    DownData: DownData(started_at=T0),
    FailedData: FailedData(started_at=T0),
    ResizeData: ResizeData(started_at=T0, before=4, after=2, removed=["n3", "n4"], forced=["n4"]),
    PrepareData: PrepareData(started_at=T0, job_id="17", state="completed"),
    HealthData: HealthData(started_at=T0, seconds=12.5, drained=["n2"]),
    NodeReplacedData: NodeReplacedData(started_at=T0, node="n3", new_node="n7", reason="collective fail",
                                       seconds=41.25, cost_usd=0.5, status="gate-failed", gate="probe failed"),
    ReplaceCappedData: ReplaceCappedData(nodes=["n5"]),
    HostReportData: HostReportData(node="n3", status="reported", detail="report-1", category="gpu"),
    StageRecord: StageRecord(stage="up", cluster="c1", status="failed", seconds=3.5, message="no quota"),
    StragglerData: StragglerData(node="n4", value=0.4, threshold=0.2, median=0.1),
    GateData: GateData(failed={"n1": "gpu missing"}, busbw_gbps=180.5, job_id="9"),
    FleetGateData: FleetGateData(drained=["n1"]),
    RetryData: RetryData(failure="hang", suspects=["n4"]),
    SpotRestoreData: SpotRestoreData(nodes=["n2"], hosts=["vm-9"]),
}


@pytest.fixture
def store(azbench_home: Path):
    s = Store.open()
    yield s
    s.close()


def insert_raw(kind: str, data_json: str | None, cluster: str = "old") -> None:
    """An events row as any azbench (or a hand) may have written it, bypassing the Store."""
    engine = sa.create_engine(f"sqlite:///{Path(os.environ['AZBENCH_HOME']) / 'azbench.db'}")
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO events (ts, cluster, run_id, kind, message, data_json) "
                             "VALUES (:ts, :cluster, NULL, :kind, 'm', :data)"),
                     {"ts": "2025-06-01 12:05:00.000000", "cluster": cluster, "kind": kind, "data": data_json})
    engine.dispose()


def test_every_model_has_a_sample_setting_every_field() -> None:
    assert set(SAMPLES) == set(PAYLOADS.values()) | {NoData}
    for model, sample in SAMPLES.items():
        assert type(sample) is model
        assert sample.model_fields_set == set(model.model_fields), f"{model.__name__}: set every field"
        for name, field in model.model_fields.items():
            assert getattr(sample, name) != field.get_default(call_default_factory=True), (model.__name__, name)


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_every_kind_round_trips_through_the_store_with_every_field(store: Store, kind: str) -> None:
    sample = SAMPLES[PAYLOADS[kind]]
    written = store.add_event(EventRow(kind=kind, cluster="c1", message="m", data=sample))
    [got] = store.list_events(cluster="c1")
    assert got.id == written.id and got.kind == kind
    assert type(got.data) is PAYLOADS[kind] and got.data == sample
    for name in type(sample).model_fields:  # read back by attribute, field by field
        assert getattr(got.data, name) == getattr(sample, name), name


def test_the_json_column_keeps_the_keys_older_readers_look_up(store: Store) -> None:
    """An older azbench reading this store looks up data_json's keys by name: they stay as its
    writers wrote them (times as ISO text, None values left out)."""
    store.add_event(EventRow(kind="resize", cluster="c1", message="4 -> 2 nodes",
                             data=ResizeData(started_at=T0, before=4, after=2, removed=["n3"])))
    store.add_event(EventRow(kind="adopt", cluster="c1", message="adopted"))
    engine = sa.create_engine(f"sqlite:///{store.where}")
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT kind, data_json FROM events ORDER BY id")).all()
    engine.dispose()
    [(_, resize), (_, adopt)] = rows
    data = json.loads(resize)
    assert data == {"before": 4, "after": 2, "removed": ["n3"], "forced": [], "started_at": data["started_at"]}
    assert datetime.fromisoformat(data["started_at"].replace("Z", "+00:00")) == T0
    assert adopt is None  # nothing recorded beyond the message, as before


def test_writers_are_refused_a_misspelt_field_a_missing_one_or_another_kinds_model() -> None:
    with pytest.raises(ValidationError, match="befor"):
        EventRow(kind="resize", data={"befor": 4})
    with pytest.raises(ValidationError, match="node"):
        EventRow(kind="node_replaced", data={"new_node": "n7"})
    with pytest.raises(ValidationError, match="records DownData, not UpData"):
        EventRow(kind="down", data=UpData(started_at=T0))
    with pytest.raises(ValidationError, match="not a known event kind"):
        EventRow(kind="made_up", data=UpData())
    assert EventRow(kind="up", data={"started_at": "2025-06-01T12:00:00Z"}).data == UpData(started_at=T0)
    assert EventRow(kind="extend").data == NoData() and EventRow(kind="down").data == DownData()


def test_rows_older_writers_wrote_read_typed(store: Store) -> None:
    """The dicts each writer put in data_json before payloads were typed (json.dumps with
    sort_keys, times as isoformat()), read back as their models."""
    old = {
        "up": {"started_at": "2025-06-01T12:00:00+00:00"},
        "resize": {"after": 2, "before": 4, "forced": [], "removed": ["n3", "n4"],
                   "started_at": "2025-06-01T12:00:00+00:00"},
        "host_reported": {"category": "", "detail": "r1", "node": "n3", "status": "reported"},
        "pipeline": {"cluster": None, "message": "", "seconds": 1.5, "stage": "setup", "status": "ok"},
        "health_gate": {"busbw_gbps": None, "failed": {"n1": "no gpu"}, "job_id": "12"},
        "node_replaced": {"cost_usd": None, "gate": "", "new_node": None, "node": "n3", "reason": "r",
                          "seconds": 2.0, "status": "failed"},
        "straggler": {"median": 0.1, "node": "n4", "threshold": 0.2, "value": 0.5},
        "health": {"drained": [], "seconds": 30.0, "started_at": "2025-06-01T12:00:00+00:00"},
    }
    for kind, data in old.items():
        insert_raw(kind, json.dumps(data, sort_keys=True))
    got = {e.kind: e.data for e in store.list_events(cluster="old")}
    assert isinstance(got["up"], UpData) and got["up"].started_at == T0
    assert isinstance(got["resize"], ResizeData) and (got["resize"].before, got["resize"].removed) == (4, ["n3", "n4"])
    assert isinstance(got["host_reported"], HostReportData) and got["host_reported"].node == "n3"
    assert isinstance(got["pipeline"], StageRecord) and got["pipeline"].stage == "setup"
    assert isinstance(got["health_gate"], GateData) and got["health_gate"].failed == {"n1": "no gpu"}
    assert got["health_gate"].busbw_gbps is None
    assert isinstance(got["node_replaced"], NodeReplacedData) and got["node_replaced"].new_node is None
    assert isinstance(got["straggler"], StragglerData) and got["straggler"].value == 0.5
    assert isinstance(got["health"], HealthData) and got["health"].began(T0) == T0


def test_old_rows_with_unknown_keys_kinds_or_shapes_still_read(store: Store) -> None:
    insert_raw("up", json.dumps({"started_at": "2025-06-01T12:00:00", "legacy": 1}))  # naive, extra key
    insert_raw("down", None)  # written before spans: no data
    insert_raw("future_kind", json.dumps({"x": [1, 2]}))  # a newer azbench's kind
    insert_raw("resize", json.dumps({"before": "four"}))  # no longer fits its model
    insert_raw("health", "{not json")
    insert_raw("node_replaced", json.dumps([1, 2]))  # not an object
    got = [(e.kind, e.data) for e in store.list_events(cluster="old")]
    assert got == [
        ("up", UpData(started_at=T0)),
        ("down", DownData()),
        ("future_kind", UnknownData(raw={"x": [1, 2]})),
        ("resize", UnknownData(raw={"before": "four"})),
        ("health", UnknownData(raw="{not json")),
        ("node_replaced", UnknownData(raw=[1, 2])),
    ]
    # Display only: the raw data survives a dump (status --json) as written.
    assert store.list_events(cluster="old")[2].model_dump(mode="json")["data"] == {"raw": {"x": [1, 2]}}


def test_goodput_reads_the_typed_spans_of_health_and_replacements() -> None:
    """Spanned.began: started_at first, else the end less the recorded seconds."""
    end = T0 + timedelta(minutes=5)
    assert HealthData(seconds=60.0).began(end) == end - timedelta(seconds=60)
    assert HealthData(started_at=T0, seconds=60.0).began(end) == T0
    assert HealthData().began(end) is None and HealthData(seconds=-1.0).began(end) is None
    assert NodeReplacedData(node="n", seconds=30.0).began(end) == end - timedelta(seconds=30)
    assert ResizeData(before=1, after=2).began(end) is None
