"""Import MLPerf result logs into the store (a submission tree or any part of one, one log, or
an azbench run directory) in one all-or-nothing store transaction.

The MLPerf layout `<round>/<submitter>/results/<system>/<benchmark>/result_N.txt` (+
`<submitter>/systems/<system>.json`, optional `scaling.json`) gives each log its context from
its path, whatever the entry point. Submitter, system and benchmark come from the folders, never
from the log (some logs say SUBMISSION_ORG_PLACEHOLDER); nodes and GPUs from the system JSON.
A log's raw bytes are archived once, as `<archive>/<sha256>.log`; its result is unique by the
sha256 within its folder: the same bytes in another system's or benchmark's folder (Dell's v5.1
retinanet and rgat logs, byte-identical for two systems) are that folder's result too
(`result_key`), and every log not stored again is named with why (ImportedFile.skipped). A file
that is not an MLPerf log or a folder mixing benchmarks fails the whole import (ConfigError);
a log without run_start, a cut log or a missing system JSON imports with a warning.

Every file it opens must be a regular file (a FIFO or a link to a device fails the import in one
line, it never hangs), and is read as a stream or with a size cap. A log whose timing is
impossible (time_ms out of range, run_stop before run_start) imports as status "invalid", with
the reason as a warning; the rest of the import goes on.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from orchestrator import paths
from orchestrator.hardware.catalog import find, size_in_system
from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.models import Frozen
from orchestrator.results.files import check_regular, kind_of, open_regular, read_small
from orchestrator.results.ingest import archive_log, file_hash
from orchestrator.results.checkpool import DEFAULT_TIMEOUT_S
from orchestrator.results.compliance import Verdict
from orchestrator.results.mllog import MAX_LINE, RunSummary, parse_file
from orchestrator.results.summary import summary_of
from orchestrator.store.database import ResultRow, Store
from orchestrator.results import checkpool  # by module: tests replace checkpool.check_logs

RESULT_RE = re.compile(r"^result_\d+\.txt$")
ROUND_RE = re.compile(r"^v(\d+)\.(\d+)(?:\.(\d+))?$")
# A round inside a folder name, on its own: "training_results_v5.1", "v4.1", "mlperf-v3.1.0".
ROUND_IN_NAME_RE = re.compile(r"(?<![A-Za-z0-9])v(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?![0-9.])")
LOGGED_RULESET_RE = re.compile(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?")
ATTEMPT_RE = re.compile(r"^attempt-(\d+)$")
RUN_LOG = "train.log"
PLACEHOLDER = "PLACEHOLDER"
JSON_LIMIT = 1 << 20  # bytes: a system description or scaling.json is a few hundred


class ImportedFile(Frozen):
    """One log and the result row it became (or already was)."""

    path: str
    content_hash: str
    result_id: int | None = None
    round: str | None = None
    submitter: str | None = None
    system: str | None = None
    benchmark: str
    status: str
    minutes: float | None = None
    nodes: int | None = None
    gpus: int | None = None
    resumed: bool = False
    compliance_ok: bool | None = None
    skipped: str | None = Field(None, description="why a duplicate was not stored again")


class ImportWarning(Frozen):
    path: str
    message: str


class ImportSummary(BaseModel):
    """What one import did: new results, files already stored, and per-file warnings."""

    source: str
    imported: list[ImportedFile] = []
    duplicates: list[ImportedFile] = []
    refiled: list[ImportedFile] = Field(default_factory=list, description="stored results "
                                        "without a round that this import's --round filed")
    warnings: list[ImportWarning] = []

    def skipped_reasons(self) -> dict[str, int]:
        """How many logs were not stored again, by why."""
        out: dict[str, int] = {}
        for d in self.duplicates:
            out[d.skipped or "already stored"] = out.get(d.skipped or "already stored", 0) + 1
        return out


@dataclass(frozen=True)
class ImportProgress:
    """Where an import stands, for a progress line: logs found, read (hashed), skipped as
    already stored, parsed, compliance-checked and stored; the stage it is in; seconds so far
    and the estimated seconds left (None until there is a rate to go by)."""

    stage: Literal["read", "parse", "check", "store", "done"]
    found: int
    read: int = 0
    skipped: int = 0
    parsed: int = 0
    to_check: int = 0
    checked: int = 0
    stored: int = 0
    elapsed_s: float = 0.0
    left_s: float | None = None


ProgressFn = Callable[[ImportProgress], None]


def import_path(
    store: Store, path: Path, *, archive_dir: Path | None = None, check_compliance: bool = False,
    progress: ProgressFn | None = None, workers: int | None = None,
    check_timeout_s: float = DEFAULT_TIMEOUT_S, round_name: str | None = None,
) -> ImportSummary:
    """Import every log under `path` in ONE store transaction; nothing is stored on error.

    A log whose bytes are stored already (its sha256) is a duplicate and is neither parsed nor
    checked again. The others are parsed, then (check_compliance) checked by mlperf_logging's
    checker in parallel worker processes, each log bounded by `check_timeout_s`
    (results/checkpool.py). `progress` hears each step. Raises NotFoundError (no such path, no
    logs under it) or ConfigError (a file that is not an MLPerf log, a folder mixing
    benchmarks). Re-importing the same bytes into the same folder is a no-op; the same bytes in
    another system's or benchmark's folder are a result of that folder too (`result_key`: the
    log is archived once). `round_name` ("v5.1") is the round of every log, for a tree whose
    folders do not name it; stored results without a round get it (ImportSummary.refiled).
    """
    given = _given_round(round_name)
    meter = _Meter(progress)
    sources = [replace(src, given_round=given) for src in discover(path)] if given else discover(path)
    meter.step(stage="read", found=len(sources))
    hashes = _hash_all(sources, meter)
    keys, stored = _result_keys(store, sources, hashes)
    refile = {k for k, row in stored.items() if given and row.round is None and row.source == "import"}
    first: dict[str, int] = {}  # the first log of each new key: the one parsed and stored
    for i, k in enumerate(keys):
        if (k not in stored or k in refile) and k not in first:
            first[k] = i
    meter.step(stage="parse", skipped=len(sources) - len(first))
    prepared: dict[int, _Prepared] = {}
    systems: dict[Path, tuple[dict[str, Any], list[str]]] = {}
    for i in first.values():
        prepared[i] = _prepare(sources[i], keys[i], systems)
        meter.step(parsed=1)
    _refuse_mixed_benchmarks(list(prepared.values()), _stored_neighbours(sources, keys, stored, prepared))
    for p in prepared.values():  # a run dir named after a stored run belongs to that run
        if p.source.run_dir and store.get_run(p.source.run_dir.name) is not None:
            p.row = p.row.model_copy(update={"run_id": p.source.run_dir.name})
    if check_compliance:  # only once the input is known good
        _check_all(list(prepared.values()), meter, workers, check_timeout_s)
    meter.step(stage="store")
    archive = archive_dir or paths.archive_dir()
    created: list[Path] = []
    try:
        rows = {i: _archived(p, hashes[i], archive, created) for i, p in prepared.items()}
        for i, k in enumerate(keys):  # a stored log whose archived copy is gone gets it back
            if k in stored:
                _archive_copy(sources[i].log, hashes[i], archive, created)
        with store.transaction():
            new_rows = {i: r for i, r in rows.items() if keys[i] not in refile}
            outcomes = dict(zip(new_rows, store.add_results(new_rows.values())))
            moved = [r.model_copy(update={"id": stored[keys[i]].id}) for i, r in rows.items()
                     if keys[i] in refile]
            store.refile_results(moved)
    except BaseException:
        for copy in created:  # a failed import leaves no trace, in the archive either
            copy.unlink(missing_ok=True)
        raise
    summary = ImportSummary(source=str(path))
    for i, (src, k) in enumerate(zip(sources, keys)):
        if i in prepared and k in refile:
            summary.refiled.append(_imported_file(src, rows[i], stored[k].id))
            summary.warnings.extend(ImportWarning(path=str(src.log), message=m)
                                    for m in prepared[i].warnings)
        elif i in prepared:
            result_id, new = outcomes[i]
            item = _imported_file(src, rows[i], result_id)
            if not new:
                item = item.model_copy(update={"skipped": "already stored (same bytes, same folder)"})
            (summary.imported if new else summary.duplicates).append(item)
            summary.warnings.extend(ImportWarning(path=str(src.log), message=m)
                                    for m in prepared[i].warnings)
        elif k in stored:
            item = _imported_file(src, stored[k], stored[k].id)
            summary.duplicates.append(item.model_copy(update={
                "skipped": "already stored (same bytes, same folder)"}))
        else:  # a second copy of a log this import stores, in the same folder
            j = first[k]
            item = _imported_file(src, rows[j], outcomes[j][0])
            summary.duplicates.append(item.model_copy(update={
                "skipped": f"same bytes as {sources[j].log.name} in the same folder"}))
    meter.step(stage="done", stored=len(summary.imported))
    return summary


def result_key(content_hash: str, placement: tuple[str, str, str] | None) -> str:
    """The key a result is stored under: the log's sha256, and for the same bytes in a second
    system's or benchmark's folder, the sha256 with that folder's own suffix
    ("<sha256>:<16 hex of submitter/system/benchmark>"): each folder keeps its result, the
    bytes are archived once (<sha256>.log)."""
    if placement is None:
        return content_hash
    import hashlib
    return f"{content_hash}:{hashlib.sha256('/'.join(placement).encode()).hexdigest()[:16]}"


def _placement(src: LogSource) -> tuple[str, str, str] | None:
    """(submitter, system, benchmark) of a log in a submission tree's folders, else None."""
    if src.submitter and src.system and src.benchmark and src.run_dir is None:
        return src.submitter, src.system, src.benchmark
    return None


def _result_keys(store: Store, sources: list[LogSource],
                 hashes: list[str]) -> tuple[list[str], dict[str, ResultRow]]:
    """Each log's result key, and the stored results among them by key. A log whose bytes are
    stored (or come first in this import) under another folder gets its folder's own key."""
    stored = store.results_by_hash(hashes)
    owner: dict[str, tuple[str, str, str] | None] = {}
    for h, row in stored.items():
        if row.submitter and row.system and row.source == "import":
            owner[h] = (row.submitter, row.system, row.benchmark)
        else:
            owner[h] = None
    keys = []
    for src, h in zip(sources, hashes):
        place = _placement(src)
        holder = owner.setdefault(h, place)
        keys.append(h if place is None or holder is None or holder == place else result_key(h, place))
    extra = [k for k in keys if k not in stored]
    stored.update(store.results_by_hash(extra))
    return keys, stored


def _given_round(round_name: str | None) -> str | None:
    """A --round value as a round folder name ('v5.1'); ConfigError for anything else."""
    if round_name is None:
        return None
    found = round_in_name(round_name.strip()) or round_of_ruleset(round_name)
    if not found:
        raise ConfigError(f"--round {round_name!r} is not an MLPerf round",
                          hint="give it as a round folder is named, e.g. v5.1")
    return found


def _hash_all(sources: list[LogSource], meter: _Meter) -> list[str]:
    """The sha256 of each log, in order. Threads: reading and hashing release the GIL, so a
    cold disk's waits overlap (a re-import is mostly this)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(src: LogSource) -> str:
        return file_hash(src.log)
    hashes: list[str] = []
    with ThreadPoolExecutor(max_workers=min(8, len(sources)) or 1) as pool:
        for h in pool.map(one, sources):
            hashes.append(h)
            meter.step(read=1)
    return hashes


class _Meter:
    """Counts an import's steps and tells `progress` (at each stage and at most every 50 ms:
    10,000 logs make 30,000 steps), with an estimate of the time left."""

    EVERY_S = 0.05

    def __init__(self, progress: ProgressFn | None) -> None:
        self._progress = progress
        self._start = time.monotonic()
        self._check_start = 0.0
        self._told = 0.0
        self.work_total = self.work_done = 0  # MLLOG lines to check, and checked: the ETA's unit
        self.stage = "read"
        self.counts = dict.fromkeys(("found", "read", "skipped", "parsed", "to_check", "checked",
                                     "stored"), 0)

    def step(self, stage: str | None = None, **counts: int) -> None:
        for key, n in counts.items():
            self.counts[key] += n
        now = time.monotonic()
        if stage is not None:
            self.stage = stage
            if stage == "check":
                self._check_start = now
        elif now - self._told < self.EVERY_S:
            return
        if self._progress is not None:
            self._told = now
            self._progress(self.snapshot(now))

    def snapshot(self, now: float) -> ImportProgress:
        return ImportProgress(stage=self.stage, elapsed_s=now - self._start,  # type: ignore[arg-type]
                              left_s=self._left(now), **self.counts)

    def _left(self, now: float) -> float | None:
        """Seconds left, from the rate of the stage under way (checking dominates)."""
        read, found = self.counts["read"], self.counts["found"]
        if self.stage == "read" and read:
            return (now - self._start) / read * (found - read)
        if self.stage == "check" and self.work_done:  # by lines: a 12,000-line log is not a 300
            return (now - self._check_start) / self.work_done * (self.work_total - self.work_done)
        return 0.0 if self.stage == "done" else None


def _check_all(prepared: list[_Prepared], meter: _Meter, workers: int | None,
               timeout_s: float) -> None:
    """Every log with a round gets mlperf_logging's verdict; one without says why not."""
    todo: list[_Prepared] = []
    for p in prepared:
        if p.row.ruleset:
            todo.append(p)
        else:
            p.warnings.append("compliance not checked: " + _no_round_reason(p.source))
    # The longest logs first: the last ones to finish are then short.
    todo.sort(key=lambda p: -p.summary.mllog_lines)
    jobs = [checkpool.CheckJob(p.source.log, p.row.ruleset or "", mllog_lines=p.summary.mllog_lines)
            for p in todo]
    meter.work_total = sum(max(job.mllog_lines or 0, 1) for job in jobs)
    meter.step(stage="check", to_check=len(todo))

    def checked(i: int, _verdict: Verdict) -> None:
        meter.work_done += max(jobs[i].mllog_lines or 0, 1)
        meter.step(checked=1)
    verdicts = checkpool.check_logs(jobs, workers=workers, timeout_s=timeout_s, on_done=checked)
    for p, verdict in zip(todo, verdicts):
        p.row = _with_verdict(p.row, verdict, p.warnings)


@dataclass(frozen=True)
class LogSource:
    """One log to import and what its place in the tree says about it."""

    log: Path
    round: str | None = None
    submitter: str | None = None
    system: str | None = None
    benchmark: str | None = None  # the folder's name: authoritative over the logged one
    systems_json: Path | None = None
    scaling_json: Path | None = None
    run_dir: Path | None = None  # set for an azbench run directory
    earlier_attempts: int = 0
    given_round: str | None = None  # `results import --round`: wins over what the tree says
    # Where to look for a vX.Y folder when neither the round folder nor the log names a
    # round: the folder above the round folder in a submission tree, else the log's folder.
    search_from: Path | None = None


def discover(path: Path) -> list[LogSource]:
    """The logs under `path` (a tree, a folder, one file or an azbench run dir), sorted."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise NotFoundError(f"{path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    root = path.resolve()
    if stat.S_ISREG(mode):
        return [_layout_source(root)]
    if not stat.S_ISDIR(mode):
        raise ConfigError(f"{path} is {kind_of(mode)}: give a folder or a log file")
    if _is_run_dir(root):
        return [_run_dir_source(root)]
    results: list[Path] = []
    run_dirs: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        if ATTEMPT_RE.match(here.name) and RUN_LOG in filenames:
            check_regular(here / RUN_LOG, "run log")
            if here.parent not in run_dirs:
                run_dirs.append(here.parent)
            continue
        for name in sorted(filenames):
            if RESULT_RE.match(name):
                check_regular(here / name, "result log")  # a FIFO named result_1.txt: refused
                results.append(here / name)
    if not results and not run_dirs:
        raise NotFoundError(
            f"no MLPerf result logs (result_N.txt) or azbench run logs "
            f"(attempt-N/{RUN_LOG}) under {path}",
            hint="point at a submission tree, a benchmark folder or one log file")
    return [_layout_source(f) for f in results] + [_run_dir_source(d) for d in run_dirs]


def ruleset_of_round(round_name: str | None) -> str | None:
    """'v3.1' -> '3.1.0'; None for anything that is not a round folder name."""
    m = ROUND_RE.match(round_name or "")
    return f"{int(m[1])}.{int(m[2])}.{int(m[3] or 0)}" if m else None


def round_in_name(name: str) -> str | None:
    """The round a folder's name holds: 'v5.1' and 'training_results_v5.1' -> 'v5.1'; None
    when no 'vX.Y' stands on its own in it ('ND_H100_v5' and 'nemo2v5.1' hold none)."""
    m = ROUND_IN_NAME_RE.search(name)
    return f"v{int(m[1])}.{int(m[2])}" + (f".{int(m[3])}" if m[3] else "") if m else None


def round_of_ruleset(ruleset: str | None) -> str | None:
    """'5.1.0' (as a log's submission_ruleset, ruleset or mlperf_version says) -> 'v5.1'."""
    m = LOGGED_RULESET_RE.fullmatch((ruleset or "").strip())
    return f"v{int(m[1])}.{int(m[2])}" if m else None


def _layout_source(log: Path) -> LogSource:
    bench_dir = log.parent
    scaling = bench_dir / "scaling.json"
    scaling_json = scaling if scaling.is_file() else None
    system_dir = bench_dir.parent
    if system_dir.parent.name != "results":
        return LogSource(log=log, scaling_json=scaling_json, search_from=log.parent)
    submitter_dir = system_dir.parent.parent
    round_dir = submitter_dir.parent  # "v5.1", or a clone's "training_results_v5.1"
    return LogSource(
        log=log, round=round_in_name(round_dir.name),
        submitter=submitter_dir.name, system=system_dir.name, benchmark=bench_dir.name,
        systems_json=submitter_dir / "systems" / f"{system_dir.name}.json",
        scaling_json=scaling_json, search_from=round_dir.parent)


def _is_run_dir(d: Path) -> bool:
    return any(ATTEMPT_RE.match(p.name) and (p / RUN_LOG).is_file() for p in d.iterdir())


def _run_dir_source(run_dir: Path) -> LogSource:
    """The last attempt that reached run_start is the run's result; earlier ones were retries."""
    attempts = sorted(
        (int(m[1]), p / RUN_LOG) for p in run_dir.iterdir()
        if (m := ATTEMPT_RE.match(p.name)) and (p / RUN_LOG).is_file())
    if not attempts:
        raise ConfigError(f"{run_dir}: no attempt-N/{RUN_LOG} is a regular file")
    started = (log for _, log in reversed(attempts) if _contains(log, b'"key": "run_start"'))
    chosen = next(started, attempts[-1][1])
    return LogSource(log=chosen, run_dir=run_dir, earlier_attempts=len(attempts) - 1)


def _contains(path: Path, needle: bytes, block: int = 1 << 20) -> bool:
    """Whether the file holds `needle`, read in blocks (a long log is never held whole)."""
    tail = b""
    with open_regular(path, "run log") as handle:
        while chunk := handle.read(block):
            window = tail + chunk  # the needle may straddle two blocks
            if needle in window:
                return True
            tail = window[max(len(window) - len(needle) + 1, 0) :]
    return False


@dataclass
class _Prepared:
    source: LogSource
    summary: RunSummary
    row: ResultRow
    warnings: list[str] = field(default_factory=list)


def _prepare(src: LogSource, content_hash: str,
             systems: dict[Path, tuple[dict[str, Any], list[str]]] | None = None) -> _Prepared:
    summary = parse_file(src.log)
    decoded = summary.mllog_lines - summary.bad_lines
    if decoded <= 0:
        kind = "binary or garbage" if summary.non_utf8_lines or summary.other_lines else "empty"
        if summary.long_lines:
            kind = f"{summary.long_lines} line(s) over {MAX_LINE >> 20} MiB skipped"
        raise ConfigError(
            f"{src.log} is not an MLPerf result log ({kind}: no readable ':::MLLOG' line in "
            f"{summary.lines_total} lines); nothing was imported",
            hint="remove the file or import the other folders one by one")
    warnings = _log_warnings(summary)
    facts = _run_dir_facts(src, summary, warnings) if src.run_dir else \
        _tree_facts(src, summary, warnings, {} if systems is None else systems)
    return _Prepared(src, summary, _row(src, summary, facts, warnings, content_hash), warnings)


def _log_warnings(s: RunSummary) -> list[str]:
    out = [f"invalid result, not scored: {why}" for why in s.problems]
    for key in ("run_start", "run_stop"):
        if s.key_counts.get(key, 0) > 1:
            out.append(f"{s.key_counts[key]} {key} events in the log: the first one is used")
    said = " ".join(s.problems)
    if s.run_start_ms is None and "run_start" not in said:
        out.append("no run_start in the log: imported as incomplete (not converged)")
    elif s.run_stop_ms is None and "run_stop" not in said:
        out.append("no run_stop in the log (run killed or log cut): imported as incomplete")
    if s.truncated:
        out.append("the file ends mid-line (cut short?)")
    if s.bad_lines:
        out.append(f"{s.bad_lines} undecodable ':::MLLOG' line(s) skipped")
    if s.long_lines:
        out.append(f"{s.long_lines} line(s) over {MAX_LINE >> 20} MiB skipped unread")
    return out


def _tree_facts(src: LogSource, s: RunSummary, warnings: list[str],
                systems: dict[Path, tuple[dict[str, Any], list[str]]]) -> dict[str, Any]:
    """round/submitter/system/benchmark/nodes/gpus/sku/scaling for a log in a submission tree."""
    logged_bench = _clean(s.benchmark)
    benchmark = src.benchmark or logged_bench
    if src.benchmark and logged_bench and logged_bench != src.benchmark:
        warnings.append(f"log says submission_benchmark {logged_bench!r} but sits in folder "
                        f"{src.benchmark!r}: filed under {src.benchmark!r}")
    if src.benchmark is None:
        warnings.append("not in <submitter>/results/<system>/<benchmark>/: names from the log")
    if src.systems_json is not None and src.systems_json not in systems:  # read once per import
        said: list[str] = []
        systems[src.systems_json] = (_system_json(src.systems_json, said), said)
    system_desc, said = systems.get(src.systems_json, ({}, [])) if src.systems_json else ({}, [])
    warnings.extend(said)
    nodes = _as_int(system_desc.get("number_of_nodes"))
    per_node = _as_int(system_desc.get("accelerators_per_node"))
    if nodes is None:
        nodes = _platform_nodes(s.platform)
    submitter = src.submitter or _clean(system_desc.get("submitter")) or _clean(s.submitter)
    system = src.system or _clean(s.platform)
    accelerator = _clean(system_desc.get("accelerator_model_name"))
    round_name, ruleset = _round_of(src, s, warnings)
    return {
        "round": round_name, "ruleset": ruleset, "submitter": submitter, "system": system, "benchmark": benchmark,
        "nodes": nodes, "gpus": nodes * per_node if nodes and per_node is not None else None,
        "sku": _sku_for(system or "", str(system_desc.get("system_name", "")), accelerator),
        "scaling_factor": _scaling_factor(src.scaling_json, warnings),
        "resumed": s.resume_step is not None,
    }


def _run_dir_facts(src: LogSource, s: RunSummary, warnings: list[str]) -> dict[str, Any]:
    """An azbench run directory: nodes from the :::DLPAL line, SKU from the logged platform."""
    nodes = _dlpal_nodes(s.dlpal) or _platform_nodes(s.platform)
    sku = _sku_for(_clean(s.platform) or "", "", None)
    row = find(sku)
    per_node = row.gpus_per_vm if row else None
    if nodes is None:
        warnings.append("node count unknown: no :::DLPAL line and no NxPLATFORM in the log")
    if src.earlier_attempts:
        warnings.append(f"{src.earlier_attempts} earlier attempt(s); "
                        f"imported {src.log.parent.name}")
    return {
        "round": None, "ruleset": _clean(s.ruleset), "submitter": _clean(s.submitter) or "azbench",
        "system": f"{nodes}x{sku}" if nodes and sku else _clean(s.platform),
        "benchmark": _clean(s.benchmark), "nodes": nodes,
        "gpus": nodes * per_node if nodes and per_node is not None else None, "sku": sku,
        "scaling_factor": None,
        "resumed": s.resume_step is not None,
    }


def _row(src: LogSource, s: RunSummary, facts: dict[str, Any], warnings: list[str],
         content_hash: str) -> ResultRow:
    benchmark = facts.pop("benchmark") or "unknown"
    if benchmark == "unknown":
        warnings.append("no benchmark folder and no submission_benchmark in the log")
    complete = s.run_start_ms is not None and s.run_stop_ms is not None
    status = "invalid" if s.problems else (s.status or "unknown") if complete else "incomplete"
    return ResultRow(
        content_hash=content_hash, source="import", benchmark=benchmark, status=status,
        converged=complete and s.converged, minutes=s.minutes,
        run_start_ms=s.run_start_ms, run_stop_ms=s.run_stop_ms,
        global_batch_size=s.global_batch_size, summary_json=s.model_dump_json(), **facts)


def _round_of(src: LogSource, s: RunSummary, warnings: list[str]) -> tuple[str | None, str | None]:
    """(round, ruleset to check with): the round folder's vX.Y, else the log's own ruleset key,
    else the nearest vX.Y in a folder above (the absolute path: a clone checked out as
    training_results_v5.1/ and imported from its Cisco/ folder is v5.1)."""
    logged = _clean(s.ruleset)
    from_log = round_of_ruleset(logged)
    if src.given_round:
        said = src.round or from_log
        if said and said != src.given_round:
            warnings.append(f"the {'round folder' if src.round else 'log'} says {said} but the "
                            f"round was given as {src.given_round} (--round): checked and filed "
                            f"as {src.given_round}")
        return src.given_round, ruleset_of_round(src.given_round)
    if src.round:
        if from_log and from_log != src.round:
            warnings.append(f"log says ruleset {logged} but sits in round folder {src.round}: "
                            f"checked and filed as {src.round}")
        return src.round, ruleset_of_round(src.round)
    if from_log:
        return from_log, ruleset_of_round("v" + (logged or "").lstrip("v"))  # '5.1.1' checks as 5.1.1
    folder = src.search_from
    while folder is not None and folder != folder.parent:
        if found := round_in_name(folder.name):
            return found, ruleset_of_round(found)
        folder = folder.parent
    return None, None


def _no_round_reason(src: LogSource) -> str:
    where = src.search_from or src.log.parent
    return (f"round unknown: no vX.Y folder in {where} or above, and no submission_ruleset, "
            "ruleset or mlperf_version key in the log: give --round")


def _with_verdict(row: ResultRow, verdict: Verdict, warnings: list[str]) -> ResultRow:
    if not verdict.ok:
        reason = f": {verdict.messages[0]}" if not verdict.checked and verdict.messages else ""
        warnings.append(f"compliance (ruleset {verdict.ruleset}) {verdict.label}{reason}")
    # compliance_ok: True passed, False did not pass, None not checked.
    return row.model_copy(update={"compliance_ok": verdict.ok if verdict.checked else None,
                                  "compliance_json": verdict.model_dump_json()})


def _stored_neighbours(sources: list[LogSource], hashes: list[str], stored: dict[str, ResultRow],
                       prepared: dict[int, _Prepared]) -> dict[Path, dict[str, list[str]]]:
    """The logged benchmarks of stored logs that share a folder with a new one: a new log joins
    their folder and must not mix benchmarks with them either."""
    folders = {p.source.log.parent for p in prepared.values() if p.source.run_dir is None}
    out: dict[Path, dict[str, list[str]]] = {}
    for src, h in zip(sources, hashes):
        row = stored.get(h)
        if row is None or src.run_dir is not None or src.log.parent not in folders:
            continue
        logged = _clean(summary_of(row).benchmark)
        if logged:
            out.setdefault(src.log.parent, {}).setdefault(logged, []).append(src.log.name)
    return out


def _refuse_mixed_benchmarks(prepared: list[_Prepared],
                             stored: dict[Path, dict[str, list[str]]]) -> None:
    by_dir: dict[Path, dict[str, list[str]]] = {
        d: {b: list(f) for b, f in names.items()} for d, names in stored.items()}
    for p in prepared:
        if p.source.run_dir is None and (logged := _clean(p.summary.benchmark)):
            files = by_dir.setdefault(p.source.log.parent, {}).setdefault(logged, [])
            files.append(p.source.log.name)
    for folder, names in by_dir.items():
        if len(names) > 1:
            listing = "; ".join(f"{b}: {', '.join(sorted(files))}" for b, files in sorted(names.items()))
            raise ConfigError(f"{folder} mixes benchmarks ({listing}); nothing was imported",
                              hint="one folder per benchmark, as in MLPerf submissions")


def _archived(p: _Prepared, content_hash: str, archive: Path, created: list[Path]) -> ResultRow:
    stored = _archive_copy(p.source.log, content_hash, archive, created)
    return p.row.model_copy(update={"log_path": str(stored)})


def _archive_copy(log: Path, content_hash: str, archive: Path, created: list[Path]) -> Path:
    existed = (archive / f"{content_hash}.log").exists()
    stored = archive_log(log, content_hash, archive)  # re-hashes a copy already there
    if not existed:
        created.append(stored)
    return stored


def _imported_file(src: LogSource, row: ResultRow, result_id: int | None) -> ImportedFile:
    return ImportedFile(
        path=str(src.log), content_hash=row.content_hash, result_id=result_id,
        round=row.round, submitter=row.submitter, system=row.system, benchmark=row.benchmark,
        status=row.status, minutes=row.minutes, nodes=row.nodes, gpus=row.gpus,
        resumed=row.resumed, compliance_ok=row.compliance_ok)


def _system_json(path: Path | None, warnings: list[str]) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(read_small(path, JSON_LIMIT, "system description"))
    except (OSError, ValueError, ConfigError, NotFoundError) as exc:
        why = "is missing" if isinstance(exc, NotFoundError) else f"is unreadable ({exc})"
        warnings.append(f"system description {path} {why}: GPUs unknown, nodes only from the "
                        "logged NxPLATFORM")
        return {}
    if not isinstance(data, dict):
        warnings.append(f"system description {path} is not a JSON object: GPUs unknown")
    return data if isinstance(data, dict) else {}


def _scaling_factor(path: Path | None, warnings: list[str]) -> float | None:
    if path is None:
        return None
    try:
        value = json.loads(read_small(path, JSON_LIMIT, "scaling file")).get("scaling_factor")
    except (OSError, ValueError, AttributeError, ConfigError, NotFoundError) as exc:
        warnings.append(f"{path} is unreadable ({exc}): no RCP scaling applied")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
        warnings.append(f"{path}: scaling_factor {value!r} is not a positive number: ignored")
        return None
    return float(value)


def _sku_for(system: str, system_name: str, accelerator: str | None) -> str | None:
    """The catalog VM size an Azure system id or name names (the rows' `mlperf.systems`
    patterns), else the accelerator model name."""
    for text in (system, system_name):
        row = size_in_system(text)
        if row:
            return row.name
    tail = system.split("x", 1)[1] if re.match(r"^\d+x.", system) else ""
    row = find(tail)
    return row.name if row else accelerator


def _dlpal_nodes(dlpal: str | None) -> int | None:
    parts = (dlpal or "").split()  # ":::DLPAL <container> <jobid> <nnodes> <nodelist> ..."
    return _as_int(parts[2]) if len(parts) > 2 else None


def _platform_nodes(platform: str | None) -> int | None:
    m = re.match(r"^([0-9]{1,9})x", _clean(platform) or "")
    return int(m[1]) if m else None


def _clean(value: Any) -> str | None:
    """A logged string, or None when absent, empty or a submission placeholder."""
    if not isinstance(value, str) or not value.strip() or PLACEHOLDER in value:
        return None
    return value.strip()


def _as_int(value: Any) -> int | None:
    """A count from a system JSON or a log: 0 to 10^9, else None (never a crash on '²')."""
    if isinstance(value, bool):
        return None
    text = str(value).strip() if isinstance(value, (int, str)) else ""
    ok = text.isascii() and text.isdigit() and len(text) <= 9
    return int(text) if ok else None
