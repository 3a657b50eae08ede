"""Where an import's logs are, and what each one's place says about it (LogSource).

A submission tree `<round>/<submitter>/results/<system>/<benchmark>/result_N.txt` names a log's
round, submitter, system and benchmark by its folders, and points at the system JSON and
scaling.json beside it; an azbench run directory (`attempt-N/train.log`) gives its last attempt
that reached run_start. Every file found must be a regular file (a FIFO named result_1.txt is
refused, never opened). The round helpers read "vX.Y" out of folder names and logged rulesets.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.results.files import check_regular, kind_of, open_regular

RESULT_RE = re.compile(r"^result_\d+\.txt$")
ROUND_RE = re.compile(r"^v(\d+)\.(\d+)(?:\.(\d+))?$")
# A round inside a folder name, on its own: "training_results_v5.1", "v4.1", "mlperf-v3.1.0".
ROUND_IN_NAME_RE = re.compile(r"(?<![A-Za-z0-9])v(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?![0-9.])")
LOGGED_RULESET_RE = re.compile(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?")
ATTEMPT_RE = re.compile(r"^attempt-(\d+)$")
RUN_LOG = "train.log"


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
    results, run_dirs = _walk(root)
    if not results and not run_dirs:
        raise NotFoundError(
            f"no MLPerf result logs (result_N.txt) or azbench run logs "
            f"(attempt-N/{RUN_LOG}) under {path}",
            hint="point at a submission tree, a benchmark folder or one log file")
    return [_layout_source(f) for f in results] + [_run_dir_source(d) for d in run_dirs]


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """(result_N.txt logs, azbench run directories) under `root`, in sorted walk order; raises
    ConfigError for one that is not a regular file."""
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
    return results, run_dirs


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
    started = (log for _, log in reversed(attempts) if file_contains(log, b'"key": "run_start"'))
    chosen = next(started, attempts[-1][1])
    return LogSource(log=chosen, run_dir=run_dir, earlier_attempts=len(attempts) - 1)


def file_contains(path: Path, needle: bytes, block: int = 1 << 20) -> bool:
    """Whether the file holds `needle`, read in blocks (a long log is never held whole)."""
    tail = b""
    with open_regular(path, "run log") as handle:
        while chunk := handle.read(block):
            window = tail + chunk  # the needle may straddle two blocks
            if needle in window:
                return True
            tail = window[max(len(window) - len(needle) + 1, 0) :]
    return False
