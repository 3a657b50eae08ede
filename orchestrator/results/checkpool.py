"""Compliance checks of many logs at once, each bounded in time and memory.

Worker processes (one per usable core) each import mlperf_logging once and check log after log
in-process (results/checker.py). A log that runs past `timeout_s` has its worker killed and
replaced, and gets a "not checked: timed out" verdict; a worker that runs out of its memory
allowance or dies says so the same way. So a hostile log costs at most `timeout_s` of one
worker, never the import. Verdicts that need no checker (mlperf_logging missing, a ruleset it
lacks) are given without starting a worker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from orchestrator.errors import NotFoundError
from orchestrator.results.compliance import Verdict, ruleset_for, supported_rulesets
from orchestrator.results import checker  # by module: a test replaces checker.run_checker

DEFAULT_TIMEOUT_S = 30.0  # a real log checks in under 2 s (a 2.6 MB GPT-3 log: 1.3 s)
# MLLOG lines a log may have and be given to the checker: 16x the most in the published logs we
# import (the 2.6 MB GPT-3 logs of v3.1: 12,545). The checker holds every line in memory and runs rule code
# on each: a million-line log would take minutes and gigabytes for a verdict on a forgery.
MAX_CHECK_LINES = 200_000
MEMORY_LIMIT = 2 << 30  # bytes of address space a worker may add to what it started with
MAX_WORKERS = 16


@dataclass(frozen=True)
class CheckJob:
    """One log to check against one ruleset ('5.1.0')."""

    log: Path
    ruleset: str
    usage: str = "training"
    mllog_lines: int | None = None  # what the importer's parse counted, when it has


def default_workers() -> int:
    """The cores this process may run on (its affinity mask), at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def check_log(log: Path, round_or_ruleset: str, *, usage: str = "training",
              timeout_s: float = DEFAULT_TIMEOUT_S) -> Verdict:
    """Check one log with the rules of `round_or_ruleset` ('v5.0', '5.0.0'); NotFoundError
    when the log does not exist, ConfigError for a malformed ruleset."""
    ruleset = ruleset_for(round_or_ruleset)
    if not Path(log).is_file():
        raise NotFoundError(f"log file {log} does not exist")
    return check_logs([CheckJob(Path(log), ruleset, usage)], workers=1, timeout_s=timeout_s)[0]


def check_logs(jobs: Sequence[CheckJob], *, workers: int | None = None,
               timeout_s: float = DEFAULT_TIMEOUT_S,
               on_done: Callable[[int, Verdict], None] | None = None) -> list[Verdict]:
    """A Verdict per job, in the jobs' order; `on_done(index, verdict)` as each one ends."""
    verdicts: list[Verdict | None] = [None] * len(jobs)

    def done(i: int, verdict: Verdict) -> None:
        verdicts[i] = verdict
        if on_done is not None:
            on_done(i, verdict)

    todo = []
    for i, job in enumerate(jobs):
        quick = _without_checker(job)
        if quick is not None:
            done(i, quick)
        else:
            todo.append(i)
    if todo:
        with _Pool(min(workers or default_workers(), len(todo))) as pool:
            pool.run(jobs, todo, timeout_s, done)
    return [v for v in verdicts if v is not None]


def _without_checker(job: CheckJob) -> Verdict | None:
    import importlib.util
    if job.mllog_lines is not None and job.mllog_lines > MAX_CHECK_LINES:
        return _not_checked(job, f"{job.mllog_lines:,} MLLOG lines, over the {MAX_CHECK_LINES:,} "
                                 "the checker is given (a 2.6 MB published GPT-3 log has 12,545)")
    if importlib.util.find_spec("mlperf_logging") is None:
        return Verdict(ok=False, ruleset=job.ruleset, checked=False,
                       messages=["mlperf_logging is not installed"])
    if job.ruleset not in supported_rulesets(job.usage):
        return Verdict(ok=False, ruleset=job.ruleset, checked=False, messages=[
            f"ruleset {job.ruleset} not supported by installed mlperf_logging"])
    return None


def _not_checked(job: CheckJob, why: str) -> Verdict:
    return Verdict(ok=False, ruleset=job.ruleset, checked=False, messages=[why])


class _Worker:
    """One checking process and the pipe to it."""

    def __init__(self, ctx: Any, others: list[_Worker]) -> None:
        parent, child = ctx.Pipe()
        # A forked worker holds copies of every descriptor open here, the importer's end of
        # its own pipe and of the other workers' among them: it closes those, or it would never
        # see its pipe end when the importer dies (kill -9) and would live on.
        forked = ctx.get_start_method() == "fork"
        inherited = [c.fileno() for c in [parent, *(w.conn for w in others)]] if forked else []
        self.proc = ctx.Process(target=_serve, args=(child, MEMORY_LIMIT, inherited), daemon=True)
        self.proc.start()
        child.close()
        self.conn: Connection = parent
        self.job = -1
        self.deadline = 0.0

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()

    def died(self) -> str:
        self.kill()
        code = self.proc.exitcode
        if code is not None and code < 0:
            return f"the checker process was killed by signal {-code}"
        return f"the checker process exited with code {code}"


class _Pool:
    def __init__(self, size: int) -> None:
        # fork: the workers start with mlperf_logging already imported here (below), in
        # milliseconds; spawn (where fork is missing) imports it in each worker.
        methods = multiprocessing.get_all_start_methods()
        self._ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        import mlperf_logging.compliance_checker.mlp_compliance  # noqa: F401
        self._workers: list[_Worker] = []
        for _ in range(size):
            self._workers.append(_Worker(self._ctx, self._workers))

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self._workers:
            if exc[0] is None and w.proc.is_alive():
                try:
                    w.conn.send(None)  # done: the worker returns
                except OSError:
                    pass
                w.proc.join(5)
            w.kill()

    def run(self, jobs: Sequence[CheckJob], todo: list[int], timeout_s: float,
            done: Callable[[int, Verdict], None]) -> None:
        pending = deque(todo)
        idle = list(self._workers)
        busy: dict[Any, _Worker] = {}  # by its pipe, as wait() returns them
        while pending or busy:
            while pending and idle:
                w, i = idle.pop(), pending.popleft()
                job = jobs[i]
                try:
                    w.conn.send((str(job.log), job.ruleset, job.usage))
                except OSError:  # it died idle (after running out of memory): replace it
                    w = self._replace(w)
                    w.conn.send((str(job.log), job.ruleset, job.usage))
                w.job, w.deadline = i, time.monotonic() + timeout_s
                busy[w.conn] = w
            soonest = min(w.deadline for w in busy.values())
            for conn in wait(list(busy), max(0.0, soonest - time.monotonic())):
                w = busy.pop(conn)
                try:
                    verdict = Verdict.model_validate(w.conn.recv())
                except (EOFError, OSError):
                    verdict = _not_checked(jobs[w.job], w.died())
                    w = self._replace(w)
                done(w.job, verdict)
                idle.append(w)
            now = time.monotonic()
            for conn, w in list(busy.items()):
                if now >= w.deadline:
                    del busy[conn]
                    done(w.job, _not_checked(
                        jobs[w.job], f"compliance checker timed out after {timeout_s:g} s"))
                    idle.append(self._replace(w))

    def _replace(self, old: _Worker) -> _Worker:
        old.kill()
        new = _Worker(self._ctx, [w for w in self._workers if w is not old])
        new.job = old.job
        self._workers[self._workers.index(old)] = new
        return new


def _serve(conn: Connection, memory_limit: int, inherited: list[int]) -> None:
    """A worker: check each (log, ruleset, usage) it receives, until None or a closed pipe (so
    a worker whose importer was killed -9 leaves after the log it is checking)."""
    for fd in inherited:
        os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the importer's to handle
    _limit_memory(memory_limit)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        log, ruleset, usage = job
        try:
            verdict = checker.run_checker(Path(log), ruleset, usage)
        except MemoryError:
            verdict = Verdict(ok=False, ruleset=ruleset, checked=False, messages=[
                f"the checker ran out of memory ({memory_limit >> 30} GiB allowed)"])
            job = None  # its heap may be in any state: answer, then leave (the pool starts another)
        try:
            conn.send(verdict.model_dump())
        except OSError:  # the importer is gone (killed): nobody to answer
            return
        if job is None:
            return


def _limit_memory(extra: int) -> None:
    """Cap this process's address space at its present size plus `extra` (Linux)."""
    try:
        import resource
        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + extra
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError, ImportError):
        pass  # no /proc or no rlimits: the time bound still holds
