"""Results kept in Azure Blob Storage: raw logs, content-hashed, and a snapshot of the store.

Layout in the container:
  logs/<sha256>               a raw log, byte for byte (metadata: its file name)
  snapshots/<sha256>.json     the store's runs, attempts, results and baselines as JSON
  index.json                  {"logs": {sha256: file name}, "snapshot": sha256}, keys sorted

`push` is idempotent: a blob named by its content's hash is uploaded only when the container
lacks it, and index.json (merged with the one already there, so colleagues' logs stay listed
under the name they were first pushed with) only when its bytes change; a second push of the
same store uploads nothing. `pull` downloads what the index lists into a folder
(logs/<sha256>_<name>, the full hash: a 48-bit prefix was found to collide in seconds,
snapshot.json), skipping files already there with the right hash,
and can import the snapshot into the local store (idempotent: results are unique by content
hash). Results keep their ids where the local store has them free, so a fresh home that pulls
sees the pusher's ids.

Nothing local goes into a snapshot: a result names its log by hash (log_sha256), never by the
path it has on one machine. A home that pulled an archive and pushes it back therefore makes the
same snapshot, names its logs as the index does, and uploads nothing.

A shared container is written by everyone who can push to it, so nothing in it is trusted about
this machine (docs/results.md, "Shared results: the threat model"):
- `pull` takes no local path from a snapshot. A result's log_path is set only to a log this pull
  verified by its sha256 (copied into the store's archive, `<home>/archive/<sha256>.log`); any
  log_path a snapshot carries is dropped, and so is a run's run_dir (a path on the pusher's
  cluster). Index entries must be sha256 names.
- `push` uploads only files under the store's own log folders (`<home>/archive`, `<home>/runs`),
  links resolved: a result pointing anywhere else is refused and listed, never read; so is a
  file with more than one hard link (a link planted in archive/ to a file elsewhere).
- index.json and snapshots are read with a size cap; a malformed one (not JSON, a name that is
  not text, a result id that is not a number, a list that is not a list) is a ConfigError
  (exit 2) naming what is wrong, before anything is imported.
- Messages never repeat a URL's query string (a SAS token in --account): safetext.redact.

The container is a Protocol (`Container`); `AzureContainer` is azure-storage-blob's
ContainerClient, imported lazily, authenticated by an account key (AZURE_STORAGE_KEY), a SAS in
the account URL, or else the shared Azure sign-in (providers.azure_shared.signin:
DefaultAzureCredential with the sovereign-cloud handling, sign-in failures in one line).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from pydantic import BaseModel

from orchestrator import paths
from orchestrator.backends import require_extra
from orchestrator.errors import ConfigError, NotFoundError, RemoteError
from orchestrator.results.ingest import archive_log
from orchestrator.safetext import redact
from orchestrator.store.schema import AttemptRow, BaselineRow, ResultRow, RunRow
from orchestrator.providers.azure_shared.signin import default_credential, quiet_sdk_loggers
from orchestrator.providers.azure_shared.errors import signin_error

if TYPE_CHECKING:
    from orchestrator.store.database import Store

INDEX = "index.json"
# Caps on what pull reads: an index of 1 M entries took 491 MB to parse. 16 MiB holds about
# 150,000 logs; a snapshot of 256 MiB several hundred thousand results.
INDEX_MAX_BYTES = 16 << 20
SNAPSHOT_MAX_BYTES = 256 << 20
KEY_ENV = "AZURE_STORAGE_KEY"
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class Container(Protocol):
    """The few blob operations the archive needs."""

    def names(self, prefix: str) -> set[str]: ...
    def get(self, name: str) -> bytes | None: ...  # None when absent
    def put(self, name: str, data: bytes, metadata: dict[str, str]) -> None: ...


@dataclass
class PushSummary:
    uploaded: list[str] = field(default_factory=list)
    skipped: int = 0
    bytes_uploaded: int = 0
    missing_logs: list[str] = field(default_factory=list)
    # results whose log_path is outside the store's log folders: not read, not uploaded
    refused_logs: list[str] = field(default_factory=list)


@dataclass
class PullSummary:
    downloaded: list[str] = field(default_factory=list)
    skipped: int = 0
    imported_results: int = 0
    folder: str = ""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


SNAPSHOT_FORMAT = "azbench-snapshot/2"
_READABLE_FORMATS = ("azbench-snapshot/1", SNAPSHOT_FORMAT)


def snapshot(store: Store, log_hashes: dict[str, str]) -> bytes:
    """The store as deterministic JSON (same store, same bytes): runs, attempts (their row ids
    left out), results (each with its id and the hash of its log, not the log's local path) and
    baselines. Format 1 had no result ids and the pusher's log paths."""
    runs = store.list_runs()
    attempts = [a for r in runs for a in store.list_attempts(r.id)]
    results = []
    for r in store.list_results():
        data = r.model_dump(mode="json", exclude={"log_path"})
        data["log_sha256"] = log_hashes.get(r.log_path or "")
        results.append(data)
    body = {
        "format": SNAPSHOT_FORMAT,
        "runs": sorted((r.model_dump(mode="json") for r in runs), key=lambda d: d["id"]),
        "attempts": sorted((a.model_dump(mode="json", exclude={"id"}) for a in attempts),
                           key=lambda d: (d["run_id"], d["attempt"])),
        "results": sorted(results, key=lambda d: d["content_hash"]),
        "baselines": sorted((b.model_dump(mode="json") for b in store.list_baselines()),
                            key=lambda d: d["name"]),
    }
    return json.dumps(body, sort_keys=True, indent=1).encode()


def push(store: Store, container: Container) -> PushSummary:
    """Upload every stored result's log (those still on disk) and a snapshot; see the module."""
    out = PushSummary()
    hashes, logs = _pushable_logs(store, out)
    _upload_logs(container, logs, out)
    snap = snapshot(store, hashes)
    snap_hash = sha256(snap)
    snap_blob = f"snapshots/{snap_hash}.json"
    _put_unless(container, snap_blob, snap, {}, snap_blob in container.names("snapshots/"), out)
    old = container.get(INDEX)
    index = _read_index(old)
    for digest, (name, _) in logs.items():
        index["logs"].setdefault(digest, name)
    index["snapshot"] = snap_hash
    new = json.dumps(index, sort_keys=True, indent=1).encode()
    _put_unless(container, INDEX, new, {}, new == old, out)
    return out


def _pushable_logs(store: Store,
                   out: PushSummary) -> tuple[dict[str, str], dict[str, tuple[str, Path]]]:
    """The stored results' logs that may be pushed: (sha256 by log_path, and (blob name, file)
    by sha256). A log outside the store's log folders or with a second hard link goes to
    `out.refused_logs` unread; one no longer on disk to `out.missing_logs`."""
    hashes: dict[str, str] = {}
    logs: dict[str, tuple[str, Path]] = {}
    roots = log_folders()
    for r in store.list_results():
        if not r.log_path or r.log_path in hashes or r.log_path in out.refused_logs:
            continue
        p = Path(r.log_path)
        if not _inside(p, roots):
            out.refused_logs.append(r.log_path)
            continue
        if not p.is_file():
            out.missing_logs.append(r.log_path)
            continue
        if p.stat().st_nlink > 1:  # a hard link resolves inside the folders yet is another file
            out.refused_logs.append(r.log_path)
            continue
        digest = _file_sha256(p)
        hashes[r.log_path] = digest
        # a pulled log: its own name (full-hash prefix; the 12-digit one of older pulls too)
        logs[digest] = (p.name.removeprefix(f"{digest}_").removeprefix(f"{digest[:12]}_"), p)
    return hashes, logs


def _upload_logs(container: Container, logs: dict[str, tuple[str, Path]], out: PushSummary) -> None:
    """Upload each log the container lacks as logs/<sha256>. Raises ConfigError for a file that
    changed or gained a hard link since it was hashed (the blob would not be its name)."""
    present = container.names("logs/")
    for digest, (name, path) in sorted(logs.items()):
        blob = f"logs/{digest}"
        if blob in present:
            out.skipped += 1
            continue
        data = path.read_bytes()
        if path.stat().st_nlink > 1:
            raise ConfigError(f"{path}: gained a second hard link while being archived; nothing uploaded")
        if sha256(data) != digest:
            raise ConfigError(f"{path}: changed while being archived; push again")
        _put_unless(container, blob, data, {"name": name}, False, out)


def _put_unless(container: Container, blob: str, data: bytes, metadata: dict[str, str],
                present: bool, out: PushSummary) -> None:
    """Upload `data` as `blob` and count it in `out`, or count it skipped when `present`."""
    if present:
        out.skipped += 1
        return
    container.put(blob, data, metadata)
    out.uploaded.append(blob)
    out.bytes_uploaded += len(data)


def pull(container: Container, folder: Path, store: Store | None = None) -> PullSummary:
    """Download the indexed logs and the latest snapshot into `folder`; with `store`, import
    the snapshot's runs, attempts and results (log paths pointing at the pulled files)."""
    raw = container.get(INDEX)
    if raw is not None and len(raw) > INDEX_MAX_BYTES:
        raise ConfigError(f"the container's {INDEX} is {len(raw):,} bytes, over the {INDEX_MAX_BYTES:,} "
                          "this azbench reads: nothing was pulled")
    if raw is None:
        raise NotFoundError("the container has no index.json: nothing was pushed there",
                            hint="azbench results push --account URL --container NAME")
    index = _read_index(raw)
    bad = [k for k in index["logs"] if not _SHA256.fullmatch(str(k))]
    if index.get("snapshot") is not None and not _SHA256.fullmatch(str(index["snapshot"])):
        bad.append(str(index["snapshot"]))
    if bad:
        raise ConfigError(f"the container's {INDEX} names {len(bad)} blob(s) that are not sha256 "
                          f"hashes (first: {bad[0][:80]!r}): nothing was pulled")
    out = PullSummary(folder=str(folder))
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    folder = folder.resolve()  # results point at their logs by absolute path
    local: dict[str, Path] = {}
    for digest, name in sorted(index["logs"].items()):
        target = folder / "logs" / f"{digest}_{_NAME_SAFE.sub('_', str(name))[:120] or 'log'}"
        local[digest] = target
        if target.is_file() and _file_sha256(target) == digest:
            out.skipped += 1
            continue
        data = _checked(container, f"logs/{digest}", digest)
        _write(target, data)
        out.downloaded.append(target.name)
    if index.get("snapshot"):
        snap = _checked(container, f"snapshots/{index['snapshot']}.json", index["snapshot"])
        if len(snap) > SNAPSHOT_MAX_BYTES:
            raise ConfigError(f"snapshot {index['snapshot'][:16]}... is {len(snap):,} bytes, over the "
                              f"{SNAPSHOT_MAX_BYTES:,} this azbench reads: nothing was imported")
        parsed = _parse_snapshot(snap) if store is not None else None
        target = folder / "snapshot.json"
        if target.is_file() and target.read_bytes() == snap:
            out.skipped += 1
        else:
            _write(target, snap)
            out.downloaded.append(target.name)
        if store is not None:
            archive = paths.archive_dir()  # each verified log, under the store's own folder
            stored = {digest: archive_log(path, digest, archive) for digest, path in local.items()}
            assert parsed is not None
            out.imported_results = import_snapshot(store, parsed, stored)
    return out


def import_snapshot(store: Store, snap: dict[str, Any], logs: dict[str, Path]) -> int:
    """Add the snapshot's runs, attempts and results the store lacks; returns results added.
    Results keep the snapshot's ids where the store has them free (in a fresh home, all of
    them); the others get new ids, in the order of the pusher's.

    `logs` maps a sha256 to the local file this pull verified has it: the only source of a
    result's log_path. A log_path in the snapshot is dropped (a crafted one could point at
    ~/.ssh/id_rsa, which the next push would upload), and so is a run's run_dir."""
    if snap.get("format") not in _READABLE_FORMATS:
        raise ConfigError(f"snapshot format {snap.get('format')!r} is not one this azbench reads "
                          f"({', '.join(_READABLE_FORMATS)})", hint="upgrade azbench")
    have_runs = {r.id for r in store.list_runs()}
    with store.transaction():
        new_runs = set()
        for data in snap.get("runs", []):
            if data["id"] not in have_runs:
                store.create_run(RunRow.model_validate({**data, "run_dir": None}))
                new_runs.add(data["id"])
        for data in snap.get("attempts", []):
            if data["run_id"] in new_runs:
                store.add_attempt(AttemptRow.model_validate(data))
        rows = []
        for data in snap.get("results", []):
            data = dict(data)
            digest = data.pop("log_sha256", None)
            data["log_path"] = str(logs[digest]) if isinstance(digest, str) and digest in logs else None
            rows.append(ResultRow.model_validate(data))
        rows.sort(key=lambda r: (r.id is None, r.id or 0, r.created_at, r.content_hash))
        added = sum(1 for _, new in store.add_results(rows, keep_ids=True) if new)
        known = {b.name for b in store.list_baselines()}
        for data in snap.get("baselines", []):
            if data["name"] not in known:
                store.save_baseline(BaselineRow.model_validate(data))
    return added


# -- Azure Blob Storage --------------------------------------------------------------------


class AzureContainer:
    """A container through azure-storage-blob (created on first use when missing)."""

    def __init__(self, account_url: str, container: str, credential: Any = None) -> None:
        require_extra("blob")  # azure-storage-blob is the [blob] extra: one line, exit 7
        from azure.storage.blob import ContainerClient, ExponentialRetry

        self.url, self.container = _check_url(account_url), container
        self.shown = redact(self.url)  # what messages say: never a SAS token
        # the SDK's default backoff starts at 15 s: an unreachable account would hold a
        # pipeline for minutes; 4 tries over ~20 s say "unreachable" soon enough
        retry = ExponentialRetry(initial_backoff=2, increment_base=2, retry_total=4)
        if credential is None:
            credential, self._signs_in = credential_for(self.url)
        else:
            self._signs_in = False
        self.client = ContainerClient(self.url, container, retry_policy=retry,
                                      credential=credential)
        self._ensured = False

    @contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """Azure SDK failures (network, refusals) as one-line RemoteErrors, a failed sign-in
        as the shared sign-in's SignInError (exit 3); no message repeats a query string."""
        from azure.core.exceptions import AzureError, ClientAuthenticationError

        try:
            if not self._ensured:
                self._ensured = True
                self._create()
            yield
        except ClientAuthenticationError as exc:
            if exc.response is None and self._signs_in:  # azure-identity's: no token to send
                raise signin_error(exc) from None
            raise self._remote(what, exc) from None  # the service's 401/403
        except AzureError as exc:
            raise self._remote(what, exc) from None

    def _remote(self, what: str, exc: BaseException) -> RemoteError:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return RemoteError(redact(f"blob storage {self.shown}/{self.container}: {what}: {first}"),
                           hint=f"check --account, --container and ${KEY_ENV} or az login")

    def _create(self) -> None:
        from azure.core.exceptions import ResourceExistsError

        try:
            self.client.create_container()
        except ResourceExistsError:
            pass

    def names(self, prefix: str) -> set[str]:
        with self._calling(f"list {prefix}"):
            return {b.name for b in self.client.list_blobs(name_starts_with=prefix)}

    def get(self, name: str) -> bytes | None:
        from azure.core.exceptions import ResourceNotFoundError

        with self._calling(f"download {name}"):
            try:
                return bytes(self.client.download_blob(name).readall())
            except ResourceNotFoundError:
                return None

    def put(self, name: str, data: bytes, metadata: dict[str, str]) -> None:
        with self._calling(f"upload {name}"):
            self.client.upload_blob(name, data, overwrite=True, metadata=metadata or None)


def credential_for(account_url: str) -> tuple[Any, bool]:
    """(credential, whether it signs in): an account key from $AZURE_STORAGE_KEY (named for
    the account in the URL); None for a URL that carries a SAS (its query string is the
    credential); else the shared sign-in's DefaultAzureCredential (az login, managed identity,
    environment; instance discovery off for a sovereign cloud's authority), with the Azure
    SDK's loggers kept off the console."""
    key = os.environ.get(KEY_ENV)
    if key:
        from azure.core.credentials import AzureNamedKeyCredential

        return AzureNamedKeyCredential(account_name(account_url), key), False
    if urlparse(account_url).query:
        return None, False

    quiet_sdk_loggers()
    return default_credential(), True


def log_folders() -> list[Path]:
    """The store's own log folders, links resolved: the archive of imported, fetched and
    pulled logs, and the runs' local folders. `push` reads nothing outside them."""
    return [paths.archive_dir().resolve(), (paths.home() / "runs").resolve()]


def _inside(path: Path, roots: list[Path]) -> bool:
    """Whether `path`, every link on the way resolved, lies under one of `roots`."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # missing (push reports it) or a loop of links
        real = Path(os.path.realpath(path))
    return any(real.is_relative_to(root) for root in roots)



def account_name(account_url: str) -> str:
    """https://NAME.blob.core.windows.net -> NAME; http://127.0.0.1:10000/NAME (Azurite's
    path-style URL) -> NAME."""
    url = urlparse(account_url)
    path = url.path.strip("/")
    if path:
        return path.split("/")[0]
    return (url.hostname or "").split(".")[0]


def _check_url(account_url: str) -> str:
    url = urlparse(account_url)
    if url.scheme not in ("https", "http") or not url.hostname:
        raise ConfigError(f"--account: '{redact(account_url)}' is not a URL like "
                          "https://ACCOUNT.blob.core.windows.net")
    return account_url.rstrip("/")


def _read_index(raw: bytes | None) -> dict[str, Any]:
    """The index as {"logs": {str: str}, "snapshot": str | None}; ConfigError for anything else."""
    if raw is None:
        return {"logs": {}, "snapshot": None}
    if len(raw) > INDEX_MAX_BYTES:
        raise ConfigError(f"the container's {INDEX} is {len(raw):,} bytes, over the {INDEX_MAX_BYTES:,} "
                          "this azbench reads")
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get("logs"), dict):
            raise ValueError("no logs mapping")
        odd = [k for k, v in data["logs"].items() if not isinstance(v, str)]
        if odd:
            raise ValueError(f"log {str(odd[0])[:20]}... has a name that is not text")
        if data.setdefault("snapshot", None) is not None and not isinstance(data["snapshot"], str):
            raise ValueError("its snapshot is not a hash")
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"the container's {INDEX} is not an azbench index: {str(exc)[:200]}") from None
    return data


_SECTIONS: dict[str, type[BaseModel]] = {"runs": RunRow, "attempts": AttemptRow, "results": ResultRow, "baselines": BaselineRow}


def _parse_snapshot(raw: bytes) -> dict[str, Any]:
    """A snapshot's JSON, checked before anything is imported: an object of a known format whose
    runs, attempts, results and baselines are lists of objects that validate as their rows
    (ids numbers, names text). ConfigError (exit 2) naming the first problem otherwise."""
    from pydantic import ValidationError
    try:
        snap = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"the pulled snapshot is not JSON: {str(exc)[:120]}") from None
    if not isinstance(snap, dict):
        raise ConfigError("the pulled snapshot is not a JSON object")
    if snap.get("format") not in _READABLE_FORMATS:
        raise ConfigError(f"snapshot format {str(snap.get('format'))[:60]!r} is not one this azbench reads "
                          f"({', '.join(_READABLE_FORMATS)})", hint="upgrade azbench")
    for section, model in _SECTIONS.items():
        items = snap.get(section, [])
        if not isinstance(items, list):
            raise ConfigError(f"the pulled snapshot's {section} is not a list")
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise ConfigError(f"the pulled snapshot's {section}[{n}] is not an object")
            data = {k: v for k, v in item.items() if k != "log_sha256"}
            if section == "results":
                data["log_path"] = None
                digest = item.get("log_sha256")
                if digest is not None and not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
                    raise ConfigError(f"the pulled snapshot's results[{n}].log_sha256 is not a sha256")
            try:
                model.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first.get("loc", ()))
                raise ConfigError(f"the pulled snapshot's {section}[{n}].{where}: "
                                  f"{str(first.get('msg', 'invalid'))[:120]}") from None
    return snap


def _checked(container: Container, name: str, digest: str) -> bytes:
    data = container.get(name)
    if data is None:
        raise NotFoundError(f"{name} is listed in {INDEX} but not in the container")
    if sha256(data) != digest:
        raise ConfigError(f"{name}: content does not match its hash (corrupt upload?)")
    return data


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
