"""Results in Azure Blob Storage (`azbench results push|pull`), against Azurite, Microsoft's
Azure Storage emulator (npm package azurite, installed by infra/setup.sh into .tools/azurite):
the harness starts azurite-blob on 127.0.0.1 on a free port with a fresh folder and stops it by
its pid. The round trip is byte-identical and a second push uploads nothing.

Azurite's account and key are the documented, public emulator defaults:
https://learn.microsoft.com/azure/storage/common/storage-use-azurite#well-known-storage-account-and-key
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import RemoteError
from orchestrator.results import archive
from orchestrator.store.database import Store
from orchestrator.store.schema import ResultRow, RunRow
from tests.cli_helpers import CliResult, one_line_error

ROOT = Path(__file__).resolve().parents[1]
ACCOUNT = "devstoreaccount1"
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")


def _azurite() -> str:
    local = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    found = str(local) if local.is_file() else shutil.which("azurite-blob")
    if not shutil.which("node") or not found:
        pytest.skip("node or Azurite is missing (infra/setup.sh installs azurite into .tools/azurite)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running azurite-blob; yields its account URL (path style, as Azurite serves it)."""
    exe, port = _azurite(), _free_port()
    folder = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen([exe, "--blobHost", "127.0.0.1", "--blobPort", str(port),
                             "--location", str(folder), "--silent", "--skipApiVersionCheck",
                             "--loose"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"azurite did not start: {err[-500:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{ACCOUNT}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(archive.KEY_ENV, KEY)


def _seed(store: Store, logs: Path) -> dict[str, bytes]:
    """Two runs with logs (one with bytes that are not UTF-8) and an import sharing a log."""
    logs.mkdir(parents=True, exist_ok=True)
    files = {"a.log": b":::MLLOG {\"key\": \"run_start\"}\r\n" * 500,
             "b.log": bytes(range(256)) * 40, "c.log": b"tail without newline"}
    for name, data in files.items():
        (logs / name).write_bytes(data)
    store.create_run(RunRow(id="r1", sweep_id="s1", cluster="c", recipe="smoke", benchmark="smoke",
                            nodes=1, state="succeeded"))
    for i, name in enumerate(files):
        store.add_result(ResultRow(content_hash=f"h{i}", run_id="r1" if i == 0 else None,
                                   source="run" if i == 0 else "import", benchmark="smoke",
                                   status="success", converged=True, minutes=1.0 + i,
                                   log_path=str(logs / name)))
    return files


def test_push_pull_round_trip_is_byte_identical_and_idempotent(azurite, key_env, tmp_path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        files = _seed(store, tmp_path / "logs")
        remote = archive.AzureContainer(azurite, "results")
        first = archive.push(store, remote)
        assert sorted(n for n in first.uploaded if n.startswith("logs/")) == \
            sorted(f"logs/{archive.sha256(d)}" for d in files.values())
        assert len(first.uploaded) == 5  # 3 logs, the snapshot, the index
        again = archive.push(store, archive.AzureContainer(azurite, "results"))
        assert again.uploaded == [] and again.bytes_uploaded == 0 and again.skipped == 5
    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as other:
        pulled = archive.pull(archive.AzureContainer(azurite, "results"), tmp_path / "pulled", other)
        assert pulled.imported_results == 3
        by_hash = {archive.sha256(p.read_bytes()): p for p in (tmp_path / "pulled" / "logs").iterdir()}
        for name, data in files.items():
            got = by_hash[archive.sha256(data)]
            assert got.read_bytes() == data and got.name.endswith(name)
        results = {r.content_hash: r for r in other.list_results()}
        assert Path(results["h1"].log_path or "").read_bytes() == files["b.log"]
        assert [r.id for r in other.list_runs()] == ["r1"]
        second = archive.pull(archive.AzureContainer(azurite, "results"), tmp_path / "pulled", other)
        assert second.downloaded == [] and second.imported_results == 0
    snap = json.loads((tmp_path / "pulled" / "snapshot.json").read_bytes())
    assert {r["content_hash"] for r in snap["results"]} == {"h0", "h1", "h2"}


def test_cli_push_twice_uploads_nothing_the_second_time(azurite, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        _seed(store, tmp_path / "logs")
    env = {**os.environ, "AZBENCH_HOME": str(home), archive.KEY_ENV: KEY, "CI": "true"}
    env.pop("AZBENCH_DB_URL", None)
    args = [sys.executable, "-m", "orchestrator", "results", "push", "--account", azurite,
            "--container", "cli", "--json"]
    runs = [subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
            for _ in range(2)]
    assert [p.returncode for p in runs] == [0, 0], runs[0].stderr
    first, second = (json.loads(p.stdout) for p in runs)
    assert len(first["uploaded"]) == 5 and second["uploaded"] == []
    bad = subprocess.run([*args[:5], "--account", "not-a-url", "--container", "cli"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert bad.returncode == 2  # a ConfigError
    assert "not a URL" in one_line_error(CliResult(bad.returncode, bad.stdout, bad.stderr))


def test_account_name_from_url() -> None:
    assert archive.account_name("https://acct1.blob.core.windows.net") == "acct1"
    assert archive.account_name("http://127.0.0.1:10000/devstoreaccount1") == "devstoreaccount1"


class _Memory:
    """The Container Protocol in memory: pull refuses a blob whose bytes do not match its hash."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def names(self, prefix: str) -> set[str]:
        return {n for n in self.blobs if n.startswith(prefix)}

    def get(self, name: str) -> bytes | None:
        return self.blobs.get(name)

    def put(self, name: str, data: bytes, metadata: dict[str, str]) -> None:
        self.blobs[name] = data


def test_pull_refuses_corrupt_blob(tmp_path) -> None:
    from orchestrator.errors import ConfigError

    mem = _Memory()
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        files = _seed(store, tmp_path / "logs")
        archive.push(store, mem)
    mem.blobs[f"logs/{archive.sha256(files['a.log'])}"] = b"tampered"
    with pytest.raises(ConfigError, match="does not match its hash"):
        archive.pull(mem, tmp_path / "out")


def test_pipeline_pushes_when_configured(azurite, key_env, azbench_home, monkeypatch) -> None:
    """The archive stage runs after the report; an unreachable account fails the stage only."""
    from orchestrator.pipelines import pipeline as pl
    from tests.test_pipeline import _sweep_with

    monkeypatch.setattr("orchestrator.runs.execute.run_sweep", _sweep_with(0.01))
    spec = pl.PipelineSpec.model_validate({
        "name": "fp", "cluster": {"provider": "fake", "sku": "local"},
        "matrix": [{"recipe": "smoke", "nodes": [1], "repeats": 1}],
        "health": {"enabled": False}, "archive": {"account": azurite, "container": "nightly"}})
    with Store.open() as store:
        result = pl.run_pipeline(spec, store)
    stage = next(g for g in result.summary.stages if g.stage == "archive")
    assert (result.summary.status, stage.status) == ("passed", "ok")
    remote = archive.AzureContainer(azurite, "nightly")
    index = json.loads(remote.get(archive.INDEX) or b"{}")
    snap = json.loads(remote.get(f"snapshots/{index['snapshot']}.json") or b"{}")
    assert [r["benchmark"] for r in snap["results"]] == ["smoke"]

    def unreachable(*_: object) -> None:
        raise RemoteError(f"blob storage {azurite}/nightly: list logs/: connection refused")
    monkeypatch.setattr(archive, "push", unreachable)
    with Store.open() as store:
        result = pl.run_pipeline(spec, store)
    stage = next(g for g in result.summary.stages if g.stage == "archive")
    assert result.summary.status == "passed" and stage.status == "failed"
    assert "blob storage" in stage.message


def test_cli_pull_into_a_fresh_home_keeps_ids_and_pushes_nothing_back(azurite, tmp_path) -> None:
    """Issue 31: a pull re-numbered results in content-hash order (id 1 became another) and the
    pulled home's push uploaded a new snapshot and index (local log paths and the pull's file
    names in them). Now the ids are the pusher's and the push back uploads nothing."""
    from tests.cli_helpers import azbench_in_process

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    hashes = ["f0" * 32, "0f" * 32, "aa" * 32]  # added in this order: content order differs
    with Store.open(f"sqlite:///{a / 'azbench.db'}") as store:
        for n, h in enumerate(hashes):
            log = tmp_path / "logs" / f"result_{n}.txt"
            log.parent.mkdir(exist_ok=True)
            log.write_bytes(f":::MLLOG {n}\n".encode())
            store.add_result(ResultRow(content_hash=h, source="import", benchmark="bert", status="success",
                                       converged=True, minutes=2.0 + n, log_path=str(log)))
    env = {archive.KEY_ENV: KEY}
    remote = ["--account", azurite, "--container", "ids"]
    ids = ["results", "list", "-o", "tsv", "--query", "[].[id, content_hash]"]

    def run(home, *args):
        result = azbench_in_process(*args, home=home, env=env, cwd=tmp_path)
        assert result.code == 0, result.err
        return result.out
    pushed = json.loads(run(a, "results", "push", *remote, "--json"))
    assert len(pushed["uploaded"]) == 5
    pulled = json.loads(run(b, "results", "pull", *remote, "--into", str(tmp_path / "pulled"), "--json"))
    assert pulled["imported_results"] == 3
    assert run(b, *ids) == run(a, *ids) == "".join(f"{n + 1}\t{h}\n" for n, h in enumerate(hashes))
    back = json.loads(run(b, "results", "push", *remote, "--json"))
    assert (back["uploaded"], back["bytes_uploaded"]) == ([], 0)
    again = json.loads(run(a, "results", "push", *remote, "--json"))
    assert again["uploaded"] == []
