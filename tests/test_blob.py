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
        deadline = time.monotonic() + 120  # an event, not a speed: returns once azurite listens
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


def test_push_pull_round_trip_is_byte_identical_and_idempotent(azurite, key_env, azbench_home,
                                                                tmp_path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        files = _seed(store, azbench_home / "archive")
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
        _seed(store, home / "archive")
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


def test_pull_refuses_corrupt_blob(azbench_home, tmp_path) -> None:
    from orchestrator.errors import ConfigError

    mem = _Memory()
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        files = _seed(store, azbench_home / "archive")
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
            log = a / "archive" / f"result_{n}.txt"  # the store's own log folder
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


# -- a shared container is written by others (issue 39, point 12) -----------------------------

def _crafted_snapshot(container: archive.AzureContainer, secret: Path, real_log_hash: str) -> None:
    """Replace the container's snapshot and index by what anyone who may write there can put:
    results that point at the victim's private file by local path, with no log, with a log
    hash that was never uploaded, and with the hash of a real log (the only honest one)."""
    base = {"source": "import", "benchmark": "bert", "status": "success", "converged": True,
            "minutes": 2.0, "round": "v5.1", "submitter": "Org", "system": "sys_a"}
    results = [
        {**base, "id": 1, "content_hash": "a" * 64, "log_path": str(secret), "log_sha256": None},
        {**base, "id": 2, "content_hash": "b" * 64, "log_path": str(secret), "log_sha256": "c" * 64},
        {**base, "id": 3, "content_hash": "d" * 64, "log_path": str(secret),
         "log_sha256": real_log_hash},
    ]
    runs = [{"id": "r9", "cluster": "c", "recipe": "smoke", "benchmark": "smoke", "nodes": 1,
             "state": "succeeded", "run_dir": str(secret.parent)}]
    snap = json.dumps({"format": archive.SNAPSHOT_FORMAT, "runs": runs, "attempts": [],
                       "results": results, "baselines": []}).encode()
    digest = archive.sha256(snap)
    container.put(f"snapshots/{digest}.json", snap, {})
    index = json.loads(container.get(archive.INDEX) or b"{}")
    index["snapshot"] = digest
    container.put(archive.INDEX, json.dumps(index).encode(), {})


def test_a_crafted_snapshot_cannot_make_push_upload_a_file_outside_the_store(
        azurite, key_env, tmp_path) -> None:
    from tests.cli_helpers import azbench_in_process

    attacker, victim = tmp_path / "attacker", tmp_path / "victim"
    secret = tmp_path / "dot-ssh" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nSECRET-KEY-MATERIAL\n")
    log = attacker / "archive" / "result_0.txt"
    log.parent.mkdir(parents=True)
    log.write_bytes(b":::MLLOG {}\n")
    with Store.open(f"sqlite:///{attacker / 'azbench.db'}") as store:
        store.add_result(ResultRow(content_hash="e" * 64, source="import", benchmark="bert",
                                   status="success", converged=True, minutes=1.0, log_path=str(log)))
    env = {archive.KEY_ENV: KEY}

    def run(home: Path, *args: str) -> str:
        result = azbench_in_process(*args, home=home, env=env, cwd=tmp_path)
        assert result.code == 0, result.err
        assert "SECRET-KEY-MATERIAL" not in result.out + result.err
        return result.out
    run(attacker, "results", "push", "--account", azurite, "--container", "shared")
    with_key = archive.AzureContainer(azurite, "shared", credential=archive.credential_for(azurite)[0])
    _crafted_snapshot(with_key, secret, archive.sha256(log.read_bytes()))

    run(victim, "results", "pull", "--account", azurite, "--container", "shared",
        "--into", str(tmp_path / "pulled"))
    with Store.open(f"sqlite:///{victim / 'azbench.db'}") as store:
        paths_by_id = {r.id: r.log_path for r in store.list_results()}
        runs = {r.id: r.run_dir for r in store.list_runs()}
    assert paths_by_id[1] is None and paths_by_id[2] is None  # no verified log: no path
    assert paths_by_id[3] == str(victim / "archive" / f"{archive.sha256(log.read_bytes())}.log")
    assert runs == {"r9": None}
    pushed = json.loads(run(victim, "results", "push", "--account", azurite, "--container",
                            "victim-copy", "--json"))
    assert pushed["refused_logs"] == [] and len([n for n in pushed["uploaded"] if n.startswith("logs/")]) == 1
    copy = archive.AzureContainer(azurite, "victim-copy", credential=archive.credential_for(azurite)[0])
    assert all(b"SECRET-KEY-MATERIAL" not in (copy.get(n) or b"") for n in copy.names(""))
    run(victim, "report", "--html", str(tmp_path / "site"))
    assert all("SECRET-KEY-MATERIAL" not in p.read_text(errors="replace")
               for p in (tmp_path / "site").rglob("*") if p.is_file() and p.suffix in (".html", ".json", ".js"))


def test_push_refuses_a_log_path_outside_the_store_s_log_folders(azbench_home, tmp_path) -> None:
    """A row an older azbench pulled (or any row) naming a file elsewhere, or a link in the
    archive pointing out of it: neither is read nor uploaded; push lists them."""
    secret = tmp_path / "id_rsa"
    secret.write_text("SECRET-KEY-MATERIAL\n")
    link = azbench_home / "archive" / "innocent.log"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret)
    mem = _Memory()
    with Store.open() as store:
        for n, path in enumerate((secret, link)):
            store.add_result(ResultRow(content_hash=f"{n}" * 64, source="import", benchmark="bert",
                                       status="success", converged=True, minutes=1.0,
                                       log_path=str(path)))
        out = archive.push(store, mem)
    assert out.refused_logs == [str(secret), str(link)]
    assert not any(n.startswith("logs/") for n in mem.blobs)
    assert all(b"SECRET-KEY-MATERIAL" not in data for data in mem.blobs.values())


def test_pull_refuses_an_index_that_names_paths_not_hashes(azbench_home, tmp_path) -> None:
    from orchestrator.errors import ConfigError
    mem = _Memory()
    mem.blobs[archive.INDEX] = json.dumps({"logs": {"../../../../etc/x": "x"}, "snapshot": None}).encode()
    with pytest.raises(ConfigError, match="not sha256 hashes"):
        archive.pull(mem, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.log"))


def test_a_sas_in_the_account_url_is_never_in_a_message(azurite, tmp_path) -> None:
    """Azurite refuses a forged SAS (403); the one line says so without the token."""
    from tests.cli_helpers import azbench_in_process

    account = f"{azurite}?sv=2024-05-04&ss=b&srt=co&sp=rwl&se=2099-01-01&sig=SECRETSIG%3D"
    result = azbench_in_process("results", "push", "--account", account, "--container", "sas",
                                home=tmp_path / "home", env={archive.KEY_ENV: ""})
    line = one_line_error(CliResult(result.code, result.out, result.err))
    assert result.code == 5 and "SECRETSIG" not in result.out + result.err, line
    assert f"{azurite}?<redacted>" in line
