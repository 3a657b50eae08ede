"""Result ids that survive the Blob archive (issue 31): a snapshot carries each result's id and
its log's hash, never a local path; a pull keeps the ids the local store has free (in a fresh
home, all of them) and numbers the others after, in the pusher's order; a home that pulled and
pushes back makes the same snapshot and the same index. The store's keep_ids runs on SQLite and
a real PostgreSQL server (numbering goes on after the kept ids). The Azurite round trips through
the CLI are in tests/test_blob.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.results import archive
from orchestrator.store.database import ResultRow, RunRow, Store
from tests.test_blob import _Memory

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ids.db'}"
    return str(request.getfixturevalue("pg_database_url"))


def a_result(hash_: str, **kw: object) -> ResultRow:
    return ResultRow(**{"content_hash": hash_, "source": "import", "benchmark": "bert",
                        "status": "success", "converged": True, "minutes": 5.0, **kw})


def test_keep_ids_keeps_free_ids_and_numbers_the_rest_after_them(db_url: str) -> None:
    with Store.open(db_url) as store:
        assert store.add_result(a_result("mine")) == (1, True)
        got = store.add_results([a_result("a", id=1), a_result("b", id=7), a_result("mine", id=3)],
                                keep_ids=True)
        # 7 is free and kept; "mine" is stored (as 1); 1 was taken: "a" is numbered after 7
        assert got == [(8, True), (7, True), (1, False)]
        assert store.add_result(a_result("next")) == (9, True)  # PostgreSQL's sequence moved on
        assert store.add_results([a_result("c", id=5)]) == [(10, True)]  # ids ignored unless asked
        assert sorted((r.id, r.content_hash) for r in store.list_results()) == \
            [(1, "mine"), (7, "b"), (8, "a"), (9, "next"), (10, "c")]


def _home(path: Path, logs: Path, hashes: list[str]) -> Store:
    """A store whose results were added in the order of `hashes`, each with a log on disk."""
    store = Store.open(f"sqlite:///{path}")
    logs.mkdir(parents=True, exist_ok=True)
    store.create_run(RunRow(id="r1", sweep_id="s1", cluster="c", recipe="smoke", benchmark="smoke",
                            nodes=1, state="succeeded"))
    for n, h in enumerate(hashes):
        log = logs / f"result_{n}.txt"
        log.write_bytes(f":::MLLOG {h}\n".encode() * (n + 1))
        store.add_result(a_result(h, run_id="r1" if n == 0 else None, log_path=str(log),
                                  source="run" if n == 0 else "import", minutes=1.0 + n))
    return store


def test_a_fresh_home_pulls_the_same_ids_and_pushes_nothing_back(tmp_path: Path, azbench_home: Path) -> None:
    """Before: results were imported in content-hash order (id 1 became 4 here) and the
    snapshot held each log's local path, so the pulled home's push uploaded a new snapshot and a
    new index (its log names carry the pull's hash prefix)."""
    hashes = ["ff" * 32, "00" * 32, "88" * 32, "44" * 32]  # added in this order: ids 1..4
    mem = _Memory()
    with _home(tmp_path / "a.db", azbench_home / "runs" / "logs", hashes) as a:  # push reads only the home's logs
        first = archive.push(a, mem)
        assert len(first.uploaded) == 6  # 4 logs, the snapshot, the index
        ids_a = [(r.id, r.content_hash) for r in a.list_results()]
    snap = json.loads(mem.blobs[f"snapshots/{json.loads(mem.blobs['index.json'])['snapshot']}.json"])
    assert snap["format"] == "azbench-snapshot/2"
    assert all("log_path" not in r and r["log_sha256"] for r in snap["results"])
    assert str(tmp_path) not in json.dumps(snap)  # nothing local leaves the machine
    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as b:
        pulled = archive.pull(mem, tmp_path / "pulled", b)
        assert pulled.imported_results == 4
        assert [(r.id, r.content_hash) for r in b.list_results()] == ids_a == \
            [(n + 1, h) for n, h in enumerate(hashes)]
        assert all(Path(r.log_path or "").is_absolute() and Path(r.log_path or "").is_file()
                   for r in b.list_results())
        blobs = dict(mem.blobs)
        back = archive.push(b, mem)
        assert (back.uploaded, back.bytes_uploaded, back.skipped) == ([], 0, 6)
        assert mem.blobs == blobs
        assert archive.pull(mem, tmp_path / "pulled", b).imported_results == 0


def test_a_home_with_its_own_results_keeps_the_free_ids(tmp_path: Path) -> None:
    mem = _Memory()
    with _home(tmp_path / "a.db", tmp_path / "a-logs", ["ff" * 32, "00" * 32, "88" * 32]) as a:
        archive.push(a, mem)
    with _home(tmp_path / "b.db", tmp_path / "b-logs", ["11" * 32]) as b:  # its own id 1
        archive.pull(mem, tmp_path / "pulled", b)
        assert sorted((r.id, r.content_hash[:2]) for r in b.list_results()) == \
            [(1, "11"), (2, "00"), (3, "88"), (4, "ff")]  # a's 1 was taken: numbered after


def test_a_pulled_log_is_indexed_by_its_own_name_and_the_first_name_stays(tmp_path: Path, azbench_home: Path) -> None:
    mem = _Memory()
    with _home(tmp_path / "a.db", azbench_home / "runs" / "logs", ["ab" * 32]) as a:
        archive.push(a, mem)
    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as b:
        archive.pull(mem, tmp_path / "pulled", b)
        fresh = _Memory()
        archive.push(b, fresh)  # to a new container: the name without the pull's hash prefix
    # the same log under the same hash; a pulled log lives in the home's archive as <sha256>.log
    # (pull never keeps a path or a name a snapshot gives it), so that is the name pushed again
    again, first = json.loads(fresh.blobs["index.json"])["logs"], json.loads(mem.blobs["index.json"])["logs"]
    assert list(again) == list(first) and list(first.values()) == ["result_0.txt"]
    assert list(again.values()) == [f"{next(iter(again))}.log"]


def test_a_format_1_snapshot_still_imports_and_an_unknown_format_is_refused(tmp_path: Path) -> None:
    row = a_result("cd" * 32).model_dump(mode="json", exclude={"id"})
    old = {"format": "azbench-snapshot/1", "runs": [], "attempts": [], "baselines": [],
           "results": [{**row, "log_path": "/elsewhere/x.log", "log_sha256": None}]}
    with Store.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        assert archive.import_snapshot(store, old, {}) == 1
        # a path is set only from a log whose sha256 pull verified, never from the snapshot
        assert [r.log_path for r in store.list_results()] == [None]
        with pytest.raises(ConfigError, match="snapshot format 'azbench-snapshot/9' is not one"):
            archive.import_snapshot(store, {**old, "format": "azbench-snapshot/9"}, {})
