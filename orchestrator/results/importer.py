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

Its concepts live beside it: import_sources.py finds the logs and reads their place in a tree,
import_facts.py turns a log and its place into a result row's fields (and warnings),
import_progress.py reports progress. This module decides what is new, parses and checks it, and
stores it all or nothing; their public names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator import paths
from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.results.ingest import archive_log, file_hash
from orchestrator.results.checkpool import DEFAULT_TIMEOUT_S
from orchestrator.results.compliance import Verdict
from orchestrator.results.import_facts import (
    Systems, clean, facts_of, log_warnings, no_round_reason, row_of)
from orchestrator.results.import_progress import ImportProgress as ImportProgress
from orchestrator.results.import_progress import Meter
from orchestrator.results.import_progress import ProgressFn as ProgressFn
from orchestrator.results.import_sources import LogSource as LogSource
from orchestrator.results.import_sources import discover as discover
from orchestrator.results.import_sources import round_in_name as round_in_name
from orchestrator.results.import_sources import round_of_ruleset as round_of_ruleset
from orchestrator.results.import_sources import ruleset_of_round as ruleset_of_round
from orchestrator.results.mllog import MAX_LINE, RunSummary, parse_file
from orchestrator.results.summary import summary_of
from orchestrator.store.database import ResultRow, Store
from orchestrator.results import checkpool  # by module: tests replace checkpool.check_logs

ALREADY_STORED = "already stored (same bytes, same folder)"


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
    meter = Meter(progress)
    plan = _plan(store, path, _given_round(round_name), meter)
    prepared = _prepare_new(store, plan, meter)
    if check_compliance:  # only once the input is known good
        _check_all(list(prepared.values()), meter, workers, check_timeout_s)
    meter.step(stage="store")
    rows, outcomes = _store_all(store, plan, prepared, archive_dir or paths.archive_dir())
    summary = _summary(str(path), plan, prepared, rows, outcomes)
    meter.step(stage="done", stored=len(summary.imported))
    return summary


@dataclass(frozen=True)
class _Plan:
    """The logs an import found, by index: each one's sha256 and result key; the stored results
    by key; the stored keys this import's --round files (`refile`); and the index of the first
    log of each key to store (`first`: the one parsed and stored, later copies are duplicates)."""

    sources: list[LogSource]
    hashes: list[str]
    keys: list[str]
    stored: dict[str, ResultRow]
    refile: set[str]
    first: dict[str, int]


def _plan(store: Store, path: Path, given: str | None, meter: Meter) -> _Plan:
    """Find and hash the logs under `path` and match them against the store (no parsing)."""
    sources = [replace(src, given_round=given) for src in discover(path)] if given else discover(path)
    meter.step(stage="read", found=len(sources))
    hashes = _hash_all(sources, meter)
    keys, stored = _result_keys(store, sources, hashes)
    refile = {k for k, row in stored.items() if given and row.round is None and row.source == "import"}
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        if (k not in stored or k in refile) and k not in first:
            first[k] = i
    return _Plan(sources, hashes, keys, stored, refile, first)


def _prepare_new(store: Store, plan: _Plan, meter: Meter) -> dict[int, _Prepared]:
    """Parse the first log of each key to store, by index. Raises ConfigError for a file that is
    not an MLPerf log or a folder that would mix benchmarks; a run directory named after a
    stored run is filed under that run."""
    meter.step(stage="parse", skipped=len(plan.sources) - len(plan.first))
    prepared: dict[int, _Prepared] = {}
    systems: Systems = {}
    for i in plan.first.values():
        prepared[i] = _prepare(plan.sources[i], plan.keys[i], systems)
        meter.step(parsed=1)
    neighbours = _stored_neighbours(plan.sources, plan.keys, plan.stored, prepared)
    _refuse_mixed_benchmarks(list(prepared.values()), neighbours)
    for p in prepared.values():  # a run dir named after a stored run belongs to that run
        if p.source.run_dir and store.get_run(p.source.run_dir.name) is not None:
            p.row = p.row.model_copy(update={"run_id": p.source.run_dir.name})
    return prepared


def _store_all(store: Store, plan: _Plan, prepared: dict[int, _Prepared],
               archive: Path) -> tuple[dict[int, ResultRow], dict[int, tuple[int, bool]]]:
    """Archive and store the prepared logs in one transaction: (their rows by index, and for
    each new row by index (result id, whether it was new)). On any error the archive copies it
    made are removed and the error goes on: a failed import leaves no trace."""
    created: list[Path] = []
    try:
        rows = {i: _archived(p, plan.hashes[i], archive, created) for i, p in prepared.items()}
        for i, k in enumerate(plan.keys):  # a stored log whose archived copy is gone gets it back
            if k in plan.stored:
                _archive_copy(plan.sources[i].log, plan.hashes[i], archive, created)
        with store.transaction():
            new_rows = {i: r for i, r in rows.items() if plan.keys[i] not in plan.refile}
            outcomes = dict(zip(new_rows, store.add_results(new_rows.values())))
            moved = [r.model_copy(update={"id": plan.stored[plan.keys[i]].id})
                     for i, r in rows.items() if plan.keys[i] in plan.refile]
            store.refile_results(moved)
    except BaseException:
        for copy in created:
            copy.unlink(missing_ok=True)
        raise
    return rows, outcomes


def _summary(source: str, plan: _Plan, prepared: dict[int, _Prepared], rows: dict[int, ResultRow],
             outcomes: dict[int, tuple[int, bool]]) -> ImportSummary:
    """What the import did with each log, in the order found: imported, refiled, or a duplicate
    with why it was not stored again; and the warnings of each log it stored."""
    summary = ImportSummary(source=source)
    for i, (src, k) in enumerate(zip(plan.sources, plan.keys)):
        if i in prepared and k in plan.refile:
            summary.refiled.append(_imported_file(src, rows[i], plan.stored[k].id))
        elif i in prepared:
            result_id, new = outcomes[i]
            item = _imported_file(src, rows[i], result_id)
            if not new:
                item = item.model_copy(update={"skipped": ALREADY_STORED})
            (summary.imported if new else summary.duplicates).append(item)
        elif k in plan.stored:
            item = _imported_file(src, plan.stored[k], plan.stored[k].id)
            summary.duplicates.append(item.model_copy(update={"skipped": ALREADY_STORED}))
        else:  # a second copy of a log this import stores, in the same folder
            j = plan.first[k]
            item = _imported_file(src, rows[j], outcomes[j][0])
            summary.duplicates.append(item.model_copy(update={
                "skipped": f"same bytes as {plan.sources[j].log.name} in the same folder"}))
        if i in prepared:
            summary.warnings.extend(ImportWarning(path=str(src.log), message=m)
                                    for m in prepared[i].warnings)
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


def _hash_all(sources: list[LogSource], meter: Meter) -> list[str]:
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


def _check_all(prepared: list[_Prepared], meter: Meter, workers: int | None,
               timeout_s: float) -> None:
    """Every log with a round gets mlperf_logging's verdict; one without says why not."""
    todo: list[_Prepared] = []
    for p in prepared:
        if p.row.ruleset:
            todo.append(p)
        else:
            p.warnings.append("compliance not checked: " + no_round_reason(p.source))
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


@dataclass
class _Prepared:
    """A parsed log: where it is, its summary, the row it will be stored as, its warnings."""

    source: LogSource
    summary: RunSummary
    row: ResultRow
    warnings: list[str] = field(default_factory=list)


def _prepare(src: LogSource, content_hash: str, systems: Systems | None = None) -> _Prepared:
    """Parse one log into its row. Raises ConfigError for a file with no readable MLLOG line;
    `systems` caches the system JSONs read so far in this import."""
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
    warnings = log_warnings(summary)
    facts = facts_of(src, summary, warnings, {} if systems is None else systems)
    return _Prepared(src, summary, row_of(src, summary, facts, warnings, content_hash), warnings)


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
        logged = clean(summary_of(row).benchmark)
        if logged:
            out.setdefault(src.log.parent, {}).setdefault(logged, []).append(src.log.name)
    return out


def _refuse_mixed_benchmarks(prepared: list[_Prepared],
                             stored: dict[Path, dict[str, list[str]]]) -> None:
    by_dir: dict[Path, dict[str, list[str]]] = {
        d: {b: list(f) for b, f in names.items()} for d, names in stored.items()}
    for p in prepared:
        if p.source.run_dir is None and (logged := clean(p.summary.benchmark)):
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
