"""A shared results container is untrusted (issue 48, points 8 and 11): pulled and archived logs are
named by their full sha256 and re-hashed before they are trusted, a malformed index or snapshot
is one config error (exit 2) before anything is imported, and push refuses a hard link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.results import archive
from orchestrator.results.ingest import archive_log
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow
from tests.test_blob import _Memory, _seed


def _pushed(tmp_path: Path, home: Path) -> tuple[_Memory, dict[str, bytes]]:
    mem = _Memory()
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        files = _seed(store, home / "archive")
        archive.push(store, mem)
    return mem, files


def test_pulled_logs_are_named_by_their_full_hash(azbench_home: Path, tmp_path: Path) -> None:
    mem, files = _pushed(tmp_path, azbench_home)
    out = archive.pull(mem, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out" / "logs").iterdir())
    assert names == sorted(f"{archive.sha256(data)}_{name}" for name, data in files.items())
    assert len(out.downloaded) == 4  # three logs and the snapshot


def test_two_logs_sharing_a_48_bit_prefix_keep_their_own_bytes(azbench_home: Path, tmp_path: Path) -> None:
    """The reported attack: a colliding 12-digit prefix gave one log the other's bytes, and the
    genuine one then read "already stored". With the full hash each keeps its own file."""
    mem = _Memory()
    genuine, forged = b"genuine log\n", b"forged log\n"
    d1 = archive.sha256(genuine)
    d2 = d1[:12] + archive.sha256(forged)[12:]  # a name that shares the prefix
    mem.blobs[f"logs/{d1}"], mem.blobs[f"logs/{d2}"] = genuine, forged
    # the forged blob cannot even be stored under a hash it does not have: pull re-hashes
    mem.blobs[archive.INDEX] = json.dumps({"logs": {d1: "a.log", d2: "a.log"}, "snapshot": None}).encode()
    with pytest.raises(ConfigError, match="does not match its hash"):
        archive.pull(mem, tmp_path / "out")
    mem.blobs[archive.INDEX] = json.dumps({"logs": {d1: "a.log"}, "snapshot": None}).encode()
    archive.pull(mem, tmp_path / "out")
    assert (tmp_path / "out" / "logs" / f"{d1}_a.log").read_bytes() == genuine


def test_the_archive_re_hashes_a_copy_already_there(tmp_path: Path) -> None:
    """A file planted under a log's hash is replaced by the genuine bytes, never trusted."""
    root = tmp_path / "archive"
    root.mkdir()
    src = tmp_path / "result_0.txt"
    src.write_bytes(b"genuine\n")
    digest = archive.sha256(b"genuine\n")
    (root / f"{digest}.log").write_bytes(b"planted\n")
    stored = archive_log(src, digest, root)
    assert stored.read_bytes() == b"genuine\n"
    with pytest.raises(ConfigError, match="does not hash"):
        archive_log(src, "0" * 64, root)
    assert not (root / f"{'0' * 64}.log").exists() and not list(root.glob("*.tmp*"))


@pytest.mark.parametrize("index, snapshot, match", [
    ({"logs": {"a" * 64: 7}}, None, "name that is not text"),
    ({"logs": {}, "snapshot": 5}, None, "not a hash"),
    (None, b"not json {", "not JSON"),
    (None, b'{"format": "azbench-snapshot/2", "results": "abc"}', "results is not a list"),
    (None, b'{"format": "azbench-snapshot/2", "results": [{"id": "x", "content_hash": "h", "source": "import", '
           b'"benchmark": "b", "status": "success"}]}', r"results\[0\]\.id"),
    (None, b'{"format": "azbench-snapshot/2", "runs": [{"id": 5, "cluster": "c"}]}', r"runs\[0\]"),
    (None, b'{"format": "azbench-snapshot/2", "runs": ["x"]}', r"runs\[0\] is not an object"),
    (None, b'[1, 2]', "not a JSON object"),
])
def test_a_malformed_index_or_snapshot_is_one_config_error_exit_2(
        azbench_home: Path, tmp_path: Path, index: object, snapshot: bytes | None, match: str) -> None:
    mem = _Memory()
    if snapshot is not None:
        digest = archive.sha256(snapshot)
        mem.blobs[f"snapshots/{digest}.json"] = snapshot
        index = {"logs": {}, "snapshot": digest}
    mem.blobs[archive.INDEX] = json.dumps(index).encode()
    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as store:
        with pytest.raises(ConfigError, match=match):
            archive.pull(mem, tmp_path / "out", store)
        assert store.list_results() == [] and store.list_runs() == []


def test_the_cli_says_a_malformed_snapshot_in_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli_helpers import azbench_in_process, one_line_error
    mem = _Memory()
    snap = b'{"format": "azbench-snapshot/2", "results": "abc"}'
    mem.blobs[f"snapshots/{archive.sha256(snap)}.json"] = snap
    mem.blobs[archive.INDEX] = json.dumps({"logs": {}, "snapshot": archive.sha256(snap)}).encode()
    monkeypatch.setattr(archive, "AzureContainer", lambda *_a, **_k: mem)
    result = azbench_in_process("results", "pull", "--account", "https://a.blob.core.windows.net",
                                "--container", "c", "--into", str(tmp_path / "p"), home=tmp_path / "home")
    assert result.code == 2 and "results is not a list" in one_line_error(result)


def test_an_index_over_its_size_cap_is_refused_unparsed(azbench_home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "INDEX_MAX_BYTES", 1000)
    mem = _Memory()
    mem.blobs[archive.INDEX] = json.dumps({"logs": {f"{n:064x}": "x" for n in range(100)}}).encode()
    with pytest.raises(ConfigError, match="over the 1,000"):
        archive.pull(mem, tmp_path / "out")


def test_push_refuses_a_hard_link_planted_in_the_archive(azbench_home: Path, tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("SECRET-KEY-MATERIAL\n")
    planted = azbench_home / "archive" / "innocent.log"
    planted.parent.mkdir(parents=True)
    os.link(secret, planted)
    mem = _Memory()
    with Store.open() as store:
        store.add_result(ResultRow(content_hash="1" * 64, source="import", benchmark="bert",
                                   status="success", converged=True, minutes=1.0, log_path=str(planted)))
        out = archive.push(store, mem)
    assert out.refused_logs == [str(planted)]
    assert all(b"SECRET-KEY-MATERIAL" not in data for data in mem.blobs.values())
