"""mlperf_logging's compliance checker, run in this process: its ComplianceChecker, its rule
files and its line parser, with two of its costs taken out and nothing else changed.

Why in-process: a subprocess per log started an interpreter and imported the checker each time;
here a worker (results/checkpool.py) imports it once and checks log after log. The checker
allows it: `mlp_compliance.make_checker(usage, ruleset, quiet, werror)` and
`ComplianceChecker.check_file(path, config)` are its API (its `__main__` is six lines around
them), it reports through the root logger, and its only module state is the `enqueued_configs`
queue, emptied here before each log. It is not thread-safe (that queue, `exec` of rule code in
module globals), so one log at a time per process.

The two costs, both replaced by exact equivalents (tests/test_checker.py reads the installed
source and compares outputs):

- `mlp_parser.ruleset_*.strip_and_dedup` cuts each line to its last `:::MLLOG` with
  `re.sub(".*" + TOKEN, TOKEN, line)`. After the match, `re.sub` retries `.*TOKEN` from every
  later position, each running to the end of the line: quadratic in the line's length (85 ms of
  a 150 ms check of a 230 KB log; minutes for a hostile one). `_cut` does the same in one pass.
- `configured_checks` reads its rule YAML with PyYAML's pure-Python BaseLoader for every log
  (about 70 ms for three files). `_CachedYaml` parses each rule file once per process (keyed by
  path, size and mtime) and hands out a deep copy.
- It `eval`s and `exec`s the rules' code strings once per log line, compiling them each time
  (a third of a small log's check). Module globals named `eval` and `exec` in mlp_compliance
  (which shadow the builtins there) compile each string once; the code strings come from the
  rule files, never from a log, so the cache is as small as the rules.
"""

from __future__ import annotations

import builtins
import copy
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import IO, Any

from orchestrator.results.compliance import CHECKER_MODULE, Verdict, supported_rulesets, trim_messages

# The rule every ruleset parser module of mlperf-logging 4.1.x applies, as written there.
UPSTREAM_STRIP = 're.sub(".*"+TOKEN, TOKEN, l)'
_FORMAT = "%(levelname)s - %(message)s"  # the checker's own __main__ formats its lines so
_patched: set[str] = set()


def _cut(line: str, token: str) -> str:
    """`re.sub(".*" + token, token, line)` in linear time: each newline-free stretch that holds
    `token` becomes `token` + what follows its last occurrence (`.` stops at a newline)."""
    if "\n" not in line[:-1]:  # the usual case: one line, its newline (if any) at the end
        at = line.rfind(token)
        return line if at < 0 else token + line[at + len(token):]
    return "\n".join(_cut(part, token) for part in line.split("\n"))


def _linear_strip(token: str) -> Callable[[Iterable[str]], list[str]]:
    def strip_and_dedup(gen: Iterable[str]) -> list[str]:
        return [_cut(line, token) for line in gen if token in line]
    return strip_and_dedup


class _CachedYaml:
    """Stands in for the `yaml` module inside mlp_compliance: `load` parses a rule file once."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._cache: dict[tuple[str, int, int, object], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def load(self, stream: IO[str], Loader: object) -> Any:  # noqa: N803 (PyYAML's name)
        name = getattr(stream, "name", None)
        if not isinstance(name, str):
            return self._real.load(stream, Loader=Loader)
        st = os.stat(name)
        key = (os.path.realpath(name), st.st_size, st.st_mtime_ns, Loader)
        if key not in self._cache:
            self._cache[key] = self._real.load(stream, Loader=Loader)
        return copy.deepcopy(self._cache[key])


_code: dict[tuple[str, str], CodeType] = {}


def _compiled(source: str, mode: str) -> CodeType:
    key = (source, mode)
    if key not in _code:  # dont_inherit: the flags a string passed to eval gets (none here)
        _code[key] = compile(source, "<string>", mode, dont_inherit=True)
    return _code[key]


def _eval(source: Any, *scopes: Any) -> Any:
    return builtins.eval(_compiled(source, "eval") if isinstance(source, str) else source, *scopes)


def _exec(source: Any, *scopes: Any) -> None:
    builtins.exec(_compiled(source, "exec") if isinstance(source, str) else source, *scopes)


def _patch(ruleset: str) -> None:
    """Swap in the linear strip for `ruleset`'s parser module, the cached YAML and the cached
    compiles, once per process."""
    import importlib

    from mlperf_logging.compliance_checker import mlp_compliance
    if not isinstance(mlp_compliance.yaml, _CachedYaml):
        vars(mlp_compliance).update(yaml=_CachedYaml(mlp_compliance.yaml), eval=_eval, exec=_exec)
    name = f"{CHECKER_MODULE}.mlp_parser.ruleset_{ruleset.replace('.', '')}"
    if name in _patched:
        return
    try:
        module = importlib.import_module(name)
    except ImportError:  # no parser for it: the checker itself says "not supported"
        return
    setattr(module, "strip_and_dedup", _linear_strip(module.TOKEN))
    _patched.add(name)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter(_FORMAT))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def run_checker(log: Path, ruleset: str, usage: str = "training") -> Verdict:
    """Check one log against `ruleset` (e.g. '5.1.0') in this process, as
    `python -m mlperf_logging.compliance_checker --usage U --ruleset R LOG` would; its lines are
    the messages. Not thread-safe; run one at a time (results/checkpool.py does)."""
    try:
        from mlperf_logging.compliance_checker import mlp_compliance
    except ImportError:
        return Verdict(ok=False, ruleset=ruleset, checked=False,
                       messages=["mlperf_logging is not installed"])
    if ruleset not in supported_rulesets(usage):
        return Verdict(ok=False, ruleset=ruleset, checked=False,
                       messages=[f"ruleset {ruleset} not supported by installed mlperf_logging"])
    _patch(ruleset)
    mlp_compliance.enqueued_configs.clear()  # a check that raised may have left some queued
    root = logging.getLogger()
    collect = _Collect()
    saved = (root.handlers[:], root.level)
    # setLevel, not `root.level =`: a logger caches isEnabledFor, and a logging.info() made while
    # the root was at WARNING (in this process, or in the one it was forked from) would keep
    # dropping the checker's INFO lines and its SUCCESS: the verdict's messages lost its evidence.
    root.handlers = [collect]
    root.setLevel(logging.INFO)
    try:
        checker = mlp_compliance.make_checker(usage, ruleset, False, False)
        ok = bool(checker.check_file(str(log), f"{usage}_{ruleset}/common.yaml"))
        if ok:  # the last line the checker's __main__ logs
            logging.info("SUCCESS")
        else:
            logging.error("FAILED")
    except MemoryError:
        raise  # the worker says "not checked": a checker out of memory judged nothing
    except Exception as exc:  # noqa: BLE001 - the checker's own crash: a traceback's last line
        ok = False
        collect.lines.append(f"compliance checker raised {type(exc).__name__}: {exc}")
    finally:
        root.handlers = saved[0]
        root.setLevel(saved[1])
        mlp_compliance.enqueued_configs.clear()
    return Verdict(ok=ok, ruleset=ruleset, messages=trim_messages("\n".join(collect.lines)))
