"""The official MLPerf compliance checker's verdict on a log, and the rulesets it knows.

A log is always checked with an explicit ruleset, because the pip version of mlperf-logging does
not say which rulesets it checks and its default drifts (docs/mlperf-notes §3.1). A ruleset the
installed package lacks, a missing package or a timeout is a Verdict with checked=False ("not
checked", never "did not pass"). The checker runs in-process in worker processes
(results/checker.py, results/checkpool.py: `check_log`, `check_logs`); `in_container` reads the
verdict the launch script recorded.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import Frozen

CHECKER_MODULE = "mlperf_logging.compliance_checker"
MAX_MESSAGES = 20
_RULESET_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
# Checker chatter that says nothing about the verdict.
_NOISE = ("INFO - Running compliance on file", "INFO -  Compliance checks:",
          "** Logging output also at", "------")


class Verdict(Frozen):
    """The checker's answer for one log: ok, the ruleset used and the lines worth reading."""

    ok: bool
    ruleset: str
    messages: list[str] = []
    # False when the checker could not judge the log (no mlperf_logging, a ruleset it lacks, a
    # timeout): such a log is "not checked", and ok says nothing.
    checked: bool = True

    @property
    def label(self) -> str:
        return "passed" if self.ok else ("did not pass" if self.checked else "not checked")


# Exit codes the launch script's checker step uses besides the checker's own 0 / non-zero.
NOT_INSTALLED_RC, RULESET_MISSING_RC = 90, 91
_LINE_RE = re.compile(r"rc=(\d+)\s+ruleset=(\S+)")


def in_container(line: str | None) -> Verdict | None:
    """The verdict of the in-container checker from the log's ":::AZBENCH_COMPLIANCE rc=N ruleset=R"
    line (templates/container_launch.sh.j2); None when the launch did not run it."""
    m = _LINE_RE.search(line or "")
    if not m:
        return None
    rc, ruleset = int(m.group(1)), m.group(2)
    if rc == NOT_INSTALLED_RC:
        return Verdict(ok=False, ruleset=ruleset, checked=False,
                       messages=["mlperf_logging is not installed in the container"])
    if rc == RULESET_MISSING_RC:
        return Verdict(ok=False, ruleset=ruleset, checked=False, messages=[
            f"ruleset {ruleset} not supported by the container's mlperf_logging"])
    return Verdict(ok=rc == 0, ruleset=ruleset,
                   messages=[] if rc == 0 else [f"compliance checker exited {rc} (compliance.out)"])


def ruleset_for(round_or_ruleset: str) -> str:
    """'v3.1' / '3.1' / '3.1.0' -> '3.1.0'. ConfigError for anything else."""
    m = _RULESET_RE.match(round_or_ruleset.strip())
    if not m:
        raise ConfigError(f"not an MLPerf round or ruleset: {round_or_ruleset!r}",
                          hint="use a round folder like v5.0 or a ruleset like 5.0.0")
    major, minor, patch = m.groups()
    return f"{int(major)}.{int(minor)}.{int(patch or 0)}"


def supported_rulesets(usage: str = "training") -> list[str]:
    """Rulesets the installed mlperf_logging ships rules for (its training_X.Y.Z folders)."""
    return list(_rulesets(usage))


@functools.lru_cache(maxsize=None)  # the installed package does not change under a process
def _rulesets(usage: str) -> tuple[str, ...]:
    spec = importlib.util.find_spec(CHECKER_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return ()
    root = Path(next(iter(spec.submodule_search_locations)))
    found = []
    for d in root.glob(f"{usage}_*"):
        name = d.name[len(usage) + 1 :]
        if d.is_dir() and re.fullmatch(r"\d+\.\d+\.\d+", name):
            found.append(name)
    return tuple(sorted(found, key=lambda r: tuple(int(x) for x in r.split("."))))


def trim_messages(output: str, limit: int = MAX_MESSAGES) -> list[str]:
    """The checker's useful lines, at most `limit`; the last line of a traceback is kept."""
    lines = [ln.strip() for ln in output.splitlines()]
    useful = [ln for ln in lines if ln and not ln.startswith(_NOISE)]
    if len(useful) <= limit:
        return useful
    hidden = len(useful) - (limit - 1)
    return useful[: limit - 2] + [f"... {hidden} more lines", useful[-1]]
