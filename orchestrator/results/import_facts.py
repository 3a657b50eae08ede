"""What a log's result row says beyond the log's own lines: the facts its place in a tree, its
submitter's system JSON and scaling.json add, the round it is filed under, and the warnings
each fact's source earns (a placeholder, a missing system description, a folder that disagrees
with the log). Submitter, system and benchmark come from the folders, never from the log (some
logs say SUBMISSION_ORG_PLACEHOLDER); nodes and GPUs from the system JSON.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.hardware.catalog import find, size_in_system
from orchestrator.results.files import read_small
from orchestrator.results.import_sources import LogSource, round_in_name, round_of_ruleset, ruleset_of_round
from orchestrator.results.mllog import MAX_LINE, RunSummary
from orchestrator.store.database import ResultRow

PLACEHOLDER = "PLACEHOLDER"
JSON_LIMIT = 1 << 20  # bytes: a system description or scaling.json is a few hundred
# Each system JSON read once per import: path -> (its object, the warnings reading it earned).
Systems = dict[Path, tuple[dict[str, Any], list[str]]]


def facts_of(src: LogSource, s: RunSummary, warnings: list[str], systems: Systems) -> dict[str, Any]:
    """The row's fields beyond the log (round, submitter, system, benchmark, nodes, GPUs, SKU,
    scaling): from the run directory or the tree; appends what it had to guess to `warnings`."""
    if src.run_dir:
        return _run_dir_facts(src, s, warnings)
    return _tree_facts(src, s, warnings, systems)


def log_warnings(s: RunSummary) -> list[str]:
    """What the log itself gives to warn about: why it is invalid, repeated or missing
    run_start/run_stop, a cut last line, lines skipped as undecodable or too long."""
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
                systems: Systems) -> dict[str, Any]:
    """round/submitter/system/benchmark/nodes/gpus/sku/scaling for a log in a submission tree."""
    logged_bench = clean(s.benchmark)
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
    submitter = src.submitter or clean(system_desc.get("submitter")) or clean(s.submitter)
    system = src.system or clean(s.platform)
    accelerator = clean(system_desc.get("accelerator_model_name"))
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
    sku = _sku_for(clean(s.platform) or "", "", None)
    row = find(sku)
    per_node = row.gpus_per_vm if row else None
    if nodes is None:
        warnings.append("node count unknown: no :::DLPAL line and no NxPLATFORM in the log")
    if src.earlier_attempts:
        warnings.append(f"{src.earlier_attempts} earlier attempt(s); "
                        f"imported {src.log.parent.name}")
    return {
        "round": None, "ruleset": clean(s.ruleset), "submitter": clean(s.submitter) or "azbench",
        "system": f"{nodes}x{sku}" if nodes and sku else clean(s.platform),
        "benchmark": clean(s.benchmark), "nodes": nodes,
        "gpus": nodes * per_node if nodes and per_node is not None else None, "sku": sku,
        "scaling_factor": None,
        "resumed": s.resume_step is not None,
    }


def row_of(src: LogSource, s: RunSummary, facts: dict[str, Any], warnings: list[str],
           content_hash: str) -> ResultRow:
    """The result row of a parsed log and its facts (which it consumes: `benchmark` is popped);
    status "invalid" for a log with problems, "incomplete" without run_start and run_stop."""
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
    logged = clean(s.ruleset)
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


def no_round_reason(src: LogSource) -> str:
    """Why a log has no round (and so no ruleset to check it with), and what to do."""
    where = src.search_from or src.log.parent
    return (f"round unknown: no vX.Y folder in {where} or above, and no submission_ruleset, "
            "ruleset or mlperf_version key in the log: give --round")


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
    m = re.match(r"^([0-9]{1,9})x", clean(platform) or "")
    return int(m[1]) if m else None


def clean(value: Any) -> str | None:
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
