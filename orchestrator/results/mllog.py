"""Turn an MLPerf `:::MLLOG {json}` log into one RunSummary, fast and without ever crashing.

The marker may sit anywhere in a line (Slurm job steps' `0: ` rank prefixes, warnings printed on the same line).
Files are read as bytes in 4 MiB blocks. The thousands of repeated per-node/per-rank lines
(`cache_clear`, `weights_initialization`, all but the first `init_start`) are only counted:
with `bytes.count` when a block holds nothing but well-formed MLLOG lines, else line by line
after sniffing the key with `bytes.find`. JSON is decoded only for the few hundred lines that
carry information. Garbage lines, undecodable JSON, invalid UTF-8 and a file cut mid-line are
counted in the summary, never raised.

Bounded in time and memory whatever the input: only regular files are opened (files.py); a line
longer than MAX_LINE (1 MiB) is skipped and counted in `long_lines`, never buffered, so a 500 MB
line without a newline costs one pass and no more than a chunk of memory. A timing event whose
`time_ms` is outside 0..2^53 ms, or a run_stop before its run_start, makes the summary invalid:
the reason goes to `problems`, its minutes are None and it is not converged.

What a summary holds (RunSummary and its parts) is run_summary.py's; this module reads logs.
"""

from __future__ import annotations

import json
import math
import statistics
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from orchestrator.errors import ConfigError
from orchestrator.results.files import open_regular
# The summary's model has its own home; its names stay importable from here.
from orchestrator.results.run_summary import Checkpoint as Checkpoint
from orchestrator.results.run_summary import EvalPoint as EvalPoint
from orchestrator.results.run_summary import RunSummary as RunSummary
from orchestrator.results.run_summary import Scalar as Scalar
from orchestrator.results.run_summary import StepTime as StepTime
from orchestrator.results.run_summary import StepTimeSource as StepTimeSource

MARKER = b":::MLLOG"
NODE_STEP_TIME = "azbench_node_step_time"  # {node: compute seconds per step}, one event per block
# A checkpoint written (azbench recipes log it: recipes/smoke/train.py): value the step it holds,
# metadata.seconds how long writing it took; its time_ms is when it was complete.
CHECKPOINT = "azbench_checkpoint"
# The batch script's own lines around the job (templates/sbatch.sh.j2, container_launch.sh.j2):
# "AZBENCH_ATTEMPT_START <epoch s> ..." before the first task, "AZBENCH_ATTEMPT_STOP <epoch s> rc=N" after.
_ATTEMPT_MARK = re.compile(r"AZBENCH_ATTEMPT_(START|STOP) (\d{1,12})\b")
# A framework's fp8/fp4 hyperparameter in the config dump many submitters' logs carry beside the
# MLLOG lines ("fp8: true", "fp8='hybrid'", "fp4='e2m1'", "fp4: false"): the precision the run
# trained in, where no MLLOG key says it (lowest_numerical_precision_in_linear is v6.0+).
_PRECISION_HINT = re.compile(rb"(?<![\w.-])fp([48])\s*[:=]\s*['\"]?([A-Za-z0-9_]{1,16})")
_FALSY = frozenset({b"false", b"none", b"null", b"0", b"no", b"off"})
_KEY_TAG = b'"key": "'
# Keys logged once per node or per rank that carry nothing a summary needs beyond a count.
# A skipped line is only checked to end with "}" (a cheap guard against cut lines).
_COUNT_ONLY = frozenset({b"cache_clear", b"weights_initialization"})
_FIRST_THEN_COUNT = frozenset({b"init_start"})
_LINE_ENDS = (b"}", b"}\r", b"} ")
# Survey of tracked_stats value keys in NVIDIA/Azure result_0.txt files (R41/R50/R51 @ the commits
# of recipes/configs/ATTRIBUTION.md): v4.1 "throughput", "train_step_timing in s",
# "validation_step_timing in s", "train_time", "walltime"; v5.0/v5.1 "train_step_time",
# "validation_step_time", "throughput", "train_loss", "validation_time", "warmup_time", ...
# Per-step keys of tracked_stats in real logs: "train_step_time" (NVIDIA mlperf_common v5.x, Azure
# v6.0), "train_step_timing in s" (NVIDIA v4.1 GPT-3 NeMo, R41 eos_n64 result_0.txt), and
# "train_step_timing". "validation_step_timing in s" is an eval step and is not one of them.
STEP_TIME_FIELDS = ("train_step_time", "train_step_timing in s", "train_step_timing")
# Benchmarks whose reference definition starts from a checkpoint: init_checkpoint_step > 0 is the
# rule there (closed_gpt3.yaml requires it), not a resumed run.
STARTS_FROM_CHECKPOINT = frozenset({"gpt3"})
_PROVENANCE = ((":::DLPAL", "dlpal"), (":::GITCOMMITID", "git_commit"), (":::SYSJSON", "sysjson"),
               (":::AZBENCH_COMPLIANCE", "compliance_line"),  # templates/container_launch.sh.j2
               (":::AZBENCH_PRECISION", "precision_line"))  # "gemm=fp4 source=..." (same)
_INTERESTING = re.compile(
    b'"key": "(?!(?:' + b"|".join(sorted(_COUNT_ONLY | _FIRST_THEN_COUNT)) + b')")')
_JSON = json.JSONDecoder()
_CHUNK = 1 << 22
MAX_LINE = 1 << 20  # bytes: a longer line is skipped and counted (long_lines), never buffered
MAX_TIME_MS = 1 << 53  # time_ms must be in [0, 2^53): epoch ms up to the year 287396, exact as float
_INT64 = 1 << 63  # ints beyond a signed 64-bit (what the SQL store keeps) are not numbers here
_BATCH = 4096


def parse_file(path: Path) -> RunSummary:
    """Stream one log file (any size) into a RunSummary, in O(size) time and O(chunk) memory.

    Raises NotFoundError if it is missing, ConfigError if it is not a regular file or unreadable.
    """
    acc = _Accumulator()
    carry = b""
    skipping = False  # inside a line over MAX_LINE: drop bytes up to its newline
    with open_regular(path, "log file") as fh:
        try:
            while chunk := fh.read(_CHUNK):
                if skipping:
                    nl = chunk.find(b"\n")
                    if nl < 0:
                        continue
                    skipping = False
                    chunk = chunk[nl + 1 :]
                data = carry + chunk if carry else chunk
                cut = data.rfind(b"\n") + 1
                carry = data[cut:]
                if cut:
                    acc.feed_whole(data[:cut] if carry else data)
                if len(carry) > MAX_LINE:  # carry stays small: no copy grows with the line
                    acc.long_line()
                    carry, skipping = b"", True
        except OSError as exc:
            raise ConfigError(f"cannot read log file {path}: {exc.strerror or exc}") from None
    if skipping:
        acc.truncated = True
    elif carry:
        acc.feed_last(carry, terminated=False)
    return acc.summary()


def parse_lines(lines: Iterable[str | bytes]) -> RunSummary:
    """Summarise lines from any source (a socket, a test). A last item without '\\n' may be cut."""
    acc = _Accumulator()
    last: bytes | None = None
    long_cut = False  # the last item was a long line without its newline
    batch: list[bytes] = []
    for item in lines:
        if last is not None:
            batch.append(last.rstrip(b"\n"))
            last = None
        raw = item.encode("utf-8", "surrogateescape") if isinstance(item, str) else item
        long_cut = len(raw) - raw.endswith(b"\n") > MAX_LINE
        if long_cut:
            acc.long_line()
            long_cut = not raw.endswith(b"\n")
        else:
            last = raw
        if len(batch) >= _BATCH:
            acc.feed(batch)
            batch = []
    acc.feed(batch)
    if last is not None:
        acc.feed_last(last.rstrip(b"\n"), terminated=last.endswith(b"\n"))
    acc.truncated = acc.truncated or long_cut
    return acc.summary()


class _Accumulator:
    """Mutable state while scanning; `summary()` freezes it into a RunSummary."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.params: dict[str, Scalar] = {}
        self.counts: dict[bytes, int] = {}
        self.skip: set[bytes] = set(_COUNT_ONLY)
        self.evals: list[EvalPoint] = []
        self.steps: list[tuple[int, int | None, float]] = []  # (time_ms, step, seconds)
        self.throughputs: list[tuple[int, float]] = []  # (time_ms, samples/s): a "throughput", no step time
        self.blocks: list[tuple[str, int]] = []
        self.block_samples: list[float | None] = []  # samples_count of each block_start
        self.eval_stops: list[int] = []
        self.eval_starts: list[int] = []
        self.checkpoints: list[Checkpoint] = []
        self.last_time_ms: int | None = None
        self.node_times: dict[str, list[float]] = {}  # azbench_node_step_time, per block
        self.evals_key: Literal["samples_count", "epoch_num"] | None = None
        self.lines = self.mllog = self.bad = self.non_utf8 = self.other = self.long = 0
        self.truncated = False
        self.problems: list[str] = []

    def long_line(self) -> None:
        self.lines += 1
        self.long += 1

    def feed_whole(self, data: bytes) -> None:
        """Whole lines (data ends in a newline), any number of them longer than MAX_LINE."""
        spans = _long_spans(data) if len(data) > MAX_LINE else []
        start = 0
        for begin, end in spans:
            if begin > start:
                self._feed_lines(data[start:begin])
            self.long_line()
            start = end
        if start == 0:
            self._feed_lines(data)
        elif start < len(data):
            self._feed_lines(data[start:])

    def _feed_lines(self, data: bytes) -> None:
        if not self.feed_block(data):
            self.feed(data[:-1].split(b"\n"))

    def feed(self, lines: list[bytes]) -> None:
        """Line path (about 0.5 us a skipped line): locals only, counters folded in per batch."""
        bad = other = 0
        skipped: list[bytes] = []
        skip, decode = self.skip, self._decode
        keep = skipped.append
        for raw in lines:
            i = raw.rfind(MARKER)  # the last marker wins, as in the official parser
            if i < 0:
                other += 1
                if b":::" in raw or b"RESULT," in raw:
                    self._provenance(raw)
                elif b"AZBENCH_ATTEMPT_" in raw:
                    self._attempt_mark(raw)
                elif b"fp" in raw:
                    self._precision_hint(raw)
                continue
            k = raw.find(_KEY_TAG, i)
            if k > 0:
                key = raw[k + 8 : raw.find(b'"', k + 8)]
                if key in skip:
                    if raw.endswith(_LINE_ENDS):
                        keep(key)
                    else:
                        bad += 1
                    continue
            if not decode(raw[i + 8 :]):
                bad += 1
        for key, n in Counter(skipped).items():
            self.counts[key] = self.counts.get(key, 0) + n
        self.lines += len(lines)
        self.mllog += len(lines) - other
        self.bad += bad
        self.other += other

    def feed_block(self, data: bytes) -> bool:
        """Fast path for whole lines (data ends in newline): C-level counts, one regex pass.

        Taken only for a block of pure MLLOG lines: each line starts with the marker, holds one
        key tag and ends with "}". Otherwise it returns False, having consumed nothing, and the
        caller falls back to `feed`. Count-only lines are counted with bytes.count here.
        """
        lines = data.count(b"\n")
        if not data.startswith(MARKER) or data.count(_KEY_TAG) != lines:
            return False
        # Every line boundary must be '}' newline marker: one long pattern, counted fast.
        eol = b"}\r\n" if data.endswith(b"}\r\n") else b"}\n"
        if not data.endswith(eol) or data.count(eol + MARKER) != lines - 1:
            return False
        first = -1
        if b"init_start" not in self.skip:
            first = data.find(_KEY_TAG + b'init_start"')
            if first >= 0 and not self._decode(_line_body(data, first)):
                return False
        for key in self.skip:
            n = data.count(_KEY_TAG + key + b'"') - (key == b"init_start" and first >= 0)
            if n:
                self.counts[key] = self.counts.get(key, 0) + n
        for m in _INTERESTING.finditer(data):
            if not self._decode(_line_body(data, m.start())):
                self.bad += 1
        self.lines += lines
        self.mllog += lines
        return True

    def feed_last(self, raw: bytes, *, terminated: bool) -> None:
        bad_before = self.bad
        self.feed([raw])
        self.truncated = not terminated and self.bad > bad_before

    def _decode(self, body: bytes) -> bool:
        try:
            text = body.decode()
        except UnicodeDecodeError:
            self.non_utf8 += 1
            text = body.decode("utf-8", "replace")
        try:
            ev = _JSON.decode(text)
        except ValueError:
            return False
        if not isinstance(ev, dict) or not isinstance(ev.get("key"), str):
            return False
        key = ev["key"]
        bkey = key.encode()
        self.counts[bkey] = self.counts.get(bkey, 0) + 1
        if bkey in _FIRST_THEN_COUNT:
            self.skip.add(bkey)
        meta = ev.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        raw_time = ev.get("time_ms")
        time_ms = as_int(raw_time)
        if (time_ms is None or not 0 <= time_ms < MAX_TIME_MS) and raw_time is not None:
            field = _FIRST_TIME.get(key)
            if field is not None and field not in self.fields:
                self.fields[field] = None  # the first one counts, and it is unusable
                self.problems.append(f"{key} has time_ms {_short(raw_time)}: not a whole "
                                     "number of ms in 0..2^53")
            time_ms = None
        if time_ms is not None and (self.last_time_ms is None or time_ms > self.last_time_ms):
            self.last_time_ms = time_ms
        _on_event(self, key, ev.get("value"), time_ms, meta)
        return True

    def _attempt_mark(self, raw: bytes) -> None:
        """The first AZBENCH_ATTEMPT_START and the last AZBENCH_ATTEMPT_STOP line (a rerun of
        the script appends to the same log: its stop is the job's end)."""
        m = _ATTEMPT_MARK.search(raw.decode("utf-8", "replace"))
        if m is None:
            return
        if m.group(1) == "START":
            self.fields.setdefault("job_start_s", int(m.group(2)))
        else:
            self.fields["job_stop_s"] = int(m.group(2))

    def _precision_hint(self, raw: bytes) -> None:
        """The first fp8/fp4 setting that turns the precision on (fp4 over fp8)."""
        for m in _PRECISION_HINT.finditer(raw[:MAX_LINE]):
            found, now = "fp" + m.group(1).decode(), self.fields.get("logged_precision")
            if m.group(2).lower() in _FALSY or now == "fp4" or now == found:
                continue
            self.fields["logged_precision"] = found
            self.fields["logged_precision_text"] = m.group(0).decode("utf-8", "replace")

    def _provenance(self, raw: bytes) -> None:
        if MARKER in raw:
            return
        text = raw.decode("utf-8", "replace").strip()
        for tag, field in _PROVENANCE:
            j = text.find(tag)
            if j >= 0 and field not in self.fields:
                rest = text[j + len(tag) :].strip()
                self.fields[field] = json_dict(rest) if field == "sysjson" else rest
                return
        j = text.find("RESULT,")
        if j >= 0 and "result_line" not in self.fields:
            self.fields["result_line"] = text[j:]

    def summary(self) -> RunSummary:
        f = self.fields
        step_times, source, eval_steps = _step_times(self.steps, self.blocks, self.eval_stops,
                                                     self.block_samples, f.get("global_batch_size"),
                                                     self.throughputs)
        resume = f.get("resume_step")
        ckpt = f.get("init_checkpoint_step")
        if resume is None and ckpt and f.get("benchmark") not in STARTS_FROM_CHECKPOINT:
            resume = ckpt
        counts = {k.decode("utf-8", "replace"): v for k, v in self.counts.items()}
        # Sorted: the block fast path meets keys out of line order, and both paths must agree.
        problems = sorted(self.problems)
        for first, last, what in (("run_start_ms", "run_stop_ms", "run"),
                                  ("init_start_ms", "init_stop_ms", "init")):
            begin, end = f.get(first), f.get(last)
            if begin is not None and end is not None and end < begin:
                problems.append(f"{what}_stop precedes {what}_start by "
                                f"{(begin - end) / 60000.0:.2f} min: no time to train")
        return RunSummary(
            **{k: v for k, v in f.items() if k != "resume_step"}, resume_step=resume,
            eval_points=self.evals, progress_key=self.evals_key, step_times=step_times,
            step_time_source=source, eval_steps=eval_steps,
            eval_spans=_pair_spans(self.eval_starts, self.eval_stops), checkpoints=self.checkpoints,
            last_time_ms=self.last_time_ms, lines_total=self.lines,
            mllog_lines=self.mllog, bad_lines=self.bad, non_utf8_lines=self.non_utf8,
            other_lines=self.other, truncated=self.truncated, long_lines=self.long,
            problems=problems, key_counts=counts,
            params=self.params,
            node_step_times={n: statistics.median(v) for n, v in self.node_times.items()},
        )


_FIRST_TIME = {"run_start": "run_start_ms", "run_stop": "run_stop_ms",
               "init_start": "init_start_ms", "init_stop": "init_stop_ms"}
_FIRST_STR = {"submission_benchmark": "benchmark", "submission_org": "submitter",
              "submission_platform": "platform", "submission_division": "division",
              "submission_status": "submission_status", "submission_ruleset": "ruleset",
              "ruleset": "ruleset", "mlperf_version": "ruleset"}
_FIRST_INT = {"global_batch_size", "gradient_accumulation_steps", "seed", "max_sequence_length",
              "init_checkpoint_step"}


def _on_event(acc: _Accumulator, key: str, value: object, time_ms: int | None, meta: dict[str, Any]) -> None:
    """Route one decoded event into the accumulator; the first occurrence of a key wins."""
    f = acc.fields
    if key in _FIRST_TIME:
        if time_ms is not None and _FIRST_TIME[key] not in f:
            f[_FIRST_TIME[key]] = time_ms
            if key == "run_stop" and meta.get("status") is not None:
                f["status"] = str(meta["status"])
    elif key in _FIRST_STR:
        if value is not None and _FIRST_STR[key] not in f:
            f[_FIRST_STR[key]] = str(value)
    elif key in _FIRST_INT:
        if key not in f and as_int(value) is not None:
            f[key] = as_int(value)
    elif key == "eval_accuracy":
        _on_eval(acc, value, time_ms, meta)
    elif key == "eval_stop" and time_ms is not None:
        acc.eval_stops.append(time_ms)
    elif key == "eval_start" and time_ms is not None:
        acc.eval_starts.append(time_ms)
    elif key == CHECKPOINT:
        step, seconds = as_int(value), as_float(meta.get("seconds"))
        if step is not None and time_ms is not None and seconds is not None and seconds >= 0:
            acc.checkpoints.append(Checkpoint(step, time_ms, seconds))
    elif key == "tracked_stats":
        _on_tracked(acc, value, time_ms, meta)
    elif key == NODE_STEP_TIME:
        for node, seconds in (value.items() if isinstance(value, dict) else ()):
            secs = as_float(seconds)
            if secs is not None and not math.isnan(secs):
                acc.node_times.setdefault(str(node), []).append(secs)
    elif key in ("block_start", "block_stop") and time_ms is not None:
        acc.blocks.append((key, time_ms))
        if key == "block_start":
            acc.block_samples.append(as_float(meta.get("samples_count")))
    elif key == "target_accuracy":
        f.setdefault("target_accuracy", as_float(value))
    elif key == "resumed_from_checkpoint":
        step = as_int(meta.get("step")) if as_int(value) is None else as_int(value)
        f.setdefault("resume_step", step if step is not None else 1)
    elif key not in acc.params and isinstance(value, (str, int, float, bool)):
        acc.params[key] = value


def _on_eval(acc: _Accumulator, value: object, time_ms: int | None, meta: dict[str, Any]) -> None:
    acc.evals_key = "samples_count" if "samples_count" in meta else "epoch_num"
    progress = meta.get(acc.evals_key)
    if as_float(progress) is None:
        progress = None
    acc.evals.append(EvalPoint(progress, as_float(value), time_ms or 0))


def _on_tracked(acc: _Accumulator, value: object, time_ms: int | None, meta: dict[str, Any]) -> None:
    # NVIDIA's mlperf_common also logs a per-block average {"throughput", "train_step_time", ...}
    # with step 0; it is not a step.
    if not isinstance(value, dict):
        return
    if "throughput" in value:
        if not any(name in value for name in STEP_TIME_FIELDS):
            rate = as_float(value.get("throughput"))
            if rate is not None and rate > 0 and not math.isinf(rate):
                acc.throughputs.append((time_ms or 0, rate))
        return
    for name in STEP_TIME_FIELDS:
        seconds = as_float(value.get(name))
        if seconds is not None:
            acc.steps.append((time_ms or 0, as_int(meta.get("step")), seconds))
            return


def _step_times(
    steps: list[tuple[int, int | None, float]], blocks: list[tuple[str, int]],
    eval_stops: list[int], block_samples: list[float | None] | None = None,
    gbs: int | None = None, throughputs: list[tuple[int, float]] | None = None,
) -> tuple[list[StepTime], StepTimeSource | None, list[int]]:
    """Per-step times and their source (StepTimeSource): tracked_stats per step, else per-block
    averages, else block duration / steps in the block, else GBS / each logged throughput, else
    whole blocks (labelled, not steps)."""
    if steps:
        ordered = sorted(steps, key=lambda s: s[0])  # rank output may interleave out of order
        out = [StepTime(s if s is not None else i, sec) for i, (_, s, sec) in enumerate(ordered)]
        stops = sum(1 for key, _ in blocks if key == "block_stop")
        if all(s is None for _, s, _ in ordered) and 0 < len(ordered) <= stops:
            return out, "tracked_block_avg", []
        times = [t for t, _, _ in ordered]
        marked: list[int] = []
        for stop in eval_stops:
            j = bisect_right(times, stop)
            if j < len(out) and out[j].step not in marked:
                marked.append(out[j].step)
        return out, "tracked_stats", marked
    spans: list[tuple[float, float | None]] = []  # (block seconds, steps in the block)
    start: int | None = None
    count: float | None = None
    samples = iter(block_samples or [])
    for key, t in blocks:
        if key == "block_start":
            start, count = t, next(samples, None)
        elif start is not None:
            spans.append(((t - start) / 1000.0, count / gbs if count and gbs else None))
            start = None
    if spans and all(n is not None and n >= 1 for _, n in spans):
        return [StepTime(i, sec / (n or 1)) for i, (sec, n) in enumerate(spans)], "block_derived", []
    if throughputs and gbs:
        windows = sorted(throughputs)  # time order, whichever path read the lines
        return [StepTime(i, gbs / rate) for i, (_, rate) in enumerate(windows)], "tracked_throughput", []
    if not spans:
        return [], None, []
    return [StepTime(i, sec) for i, (sec, _) in enumerate(spans)], "block", []


def _pair_spans(starts: list[int], stops: list[int]) -> list[tuple[int, int]]:
    """(start, stop) per stop, with the latest start at or before it not yet paired; a stop
    without one, or a start never stopped (a job cut mid-eval), makes no span."""
    spans: list[tuple[int, int]] = []
    ordered, used = sorted(starts), 0
    for stop in sorted(stops):
        j = bisect_right(ordered, stop)
        if j > used:
            spans.append((ordered[j - 1], stop))
            used = j
    return spans


def _line_body(data: bytes, pos: int) -> bytes:
    """The JSON after the marker on the line holding `pos`; the line starts with the marker."""
    return data[data.rfind(b"\n", 0, pos) + 1 + len(MARKER) : data.find(b"\n", pos)]


def _long_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end past its newline) of each line over MAX_LINE in `data` (which ends in one).

    Probes windows of MAX_LINE/2 bytes for a newline: a line over MAX_LINE holds a whole window,
    so a block of ordinary lines costs one short `find` per window, and nothing is copied.
    """
    spans: list[tuple[int, int]] = []
    width, pos, size = MAX_LINE // 2, 0, len(data)
    while pos + width <= size:
        if data.find(b"\n", pos, pos + width) >= 0:
            pos += width
            continue
        begin = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos + width) + 1
        if end - 1 - begin > MAX_LINE:
            spans.append((begin, end))
        pos = end
    return spans


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- lenient value coercion (ints logged as floats or strings, JSON bodies) ------------------

def as_int(v: object) -> int | None:
    """An int within signed 64 bits (ints logged as floats or digit strings), else None."""
    if type(v) is int:  # the common case first: this runs for every decoded event
        return v if -_INT64 <= v < _INT64 else None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    elif isinstance(v, str):
        text = v.strip()
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
            return None
        v = int(text)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return v if -_INT64 <= v < _INT64 else None


def as_float(v: object) -> float | None:
    """A finite float, else None (bools, NaN, infinities and ints too large for a float)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        out = float(v)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def json_dict(text: str) -> dict[str, Any] | None:
    try:
        return obj if isinstance(obj := json.loads(text), dict) else None
    except ValueError:
        return None
