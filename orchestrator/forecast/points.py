"""The points a forecast stands on, for one benchmark on one GPU: chosen, labelled, and the ones
left out with the reason.

Published points (recipes/published/training_results.csv through results.published): closed
division, category "available", complete results (as many result files as the benchmark
requires); per GPU count and round the fastest score (the olympic mean x the RCP scaling
factor, the published score); a result more than TUNED_FACTOR x slower than the fastest at its
GPU count in any round is left out (another software stack, e.g. DeepSpeed beside NeMo, not
the tuned recipe azbench runs); a result republished unchanged in a later round (same GPU count,
same score) counts once, in its first round. Each round is a group: the model gives every group
its own level (software gets faster between rounds) over one shared shape.

Stored points (the store's ResultRows: the user's runs and imports): grouped per (system,
round, submitter) as the report groups them, scored as the report scores them
(results.definitions.time_to_train; a partial score is used and says so); resumed runs and runs
that failed compliance never count.
They form the group "stored", which takes precedence: when there is one, predictions are made
at its level, and the table's "measured" column shows the stored score at its GPU count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from orchestrator.errors import ConfigError
from pydantic import Field

from orchestrator.models import Frozen
from orchestrator.results import metrics
from orchestrator.results.definitions import launch_order, time_to_train
from orchestrator.results.published import (BENCHMARK_ALIASES, PublishedResult, canonical_benchmark,
                                            catalog_gpu, load_published, round_key)
from orchestrator.store.schema import ResultRow

TUNED_FACTOR = 2.0  # a result slower than this x the fastest at its GPU count is left out
STORED = "stored"  # the group of the user's stored results
_SAME_SCORE_RTOL = 1e-6
COPY_RTOL = 1e-4  # a stored score this close to a published one at its GPU count is the same result


class Point(Frozen):
    """One measured time-to-train: `minutes` (a score) on `gpus` GPUs, in `group` (a published
    round such as "v5.1", or "stored"), with where it came from (`label`), who measured it in
    which round (`by`: "v4.0 NVIDIA"; a stored result's "stored v5.1 Microsoft") and the round it
    ran in (`round`, None when a stored result does not say)."""

    gpus: int
    nodes: int | None = None
    minutes: float
    group: str
    source: Literal["published", "stored"]
    label: str
    by: str = ""
    round: str | None = None
    note: str = ""
    scaling_factor: float = Field(1.0, description="the RCP scaling factor in `minutes` "
                                  "(score = the runs' olympic mean x it): a run's wall time is "
                                  "minutes / scaling_factor")
    run_minutes: list[float | None] = Field(default_factory=list, description="a stored score's "
                                            "runs' own minutes, launch order, resumed ones left out")


class LeftOut(Frozen):
    """A result that could have been a point, and why it is not."""

    gpus: int | None
    minutes: float | None
    label: str
    reason: str


class SeriesPoints(Frozen):
    """Every point of one benchmark x GPU, published and stored, and what was left out."""

    benchmark: str
    gpu: str
    points: list[Point]
    left_out: list[LeftOut] = []

    @property
    def scales(self) -> list[int]:
        """The distinct GPU counts measured, ascending."""
        return sorted({p.gpus for p in self.points})

    @property
    def stored(self) -> list[Point]:
        return [p for p in self.points if p.source == "stored"]

    @property
    def groups(self) -> list[str]:
        """The groups, oldest round first, "stored" last."""
        return sorted({p.group for p in self.points}, key=group_order)


def group_order(group: str) -> tuple[int, tuple[int, ...]]:
    """Rounds by number, "stored" after every round."""
    return (1, ()) if group == STORED else (0, round_key(group))


def series_points(benchmark: str, gpu: str, stored: Sequence[ResultRow] = (),
                  published: Sequence[PublishedResult] | None = None) -> SeriesPoints:
    """The points for `benchmark` on `gpu` (a catalog alias such as "gb200"): the published ones
    (`published`, default the vendored table) and the stored ones."""
    bench = canonical_benchmark(benchmark)
    rows = load_published() if published is None else published
    points, left = published_points(bench, gpu, rows)
    mine, left_mine = stored_points(bench, gpu, stored)
    points, mine, copies = _without_copies(mine, points)
    return SeriesPoints(benchmark=bench, gpu=gpu, points=points + mine, left_out=left + left_mine + copies)


def _without_copies(stored: list[Point], published: list[Point]
                    ) -> tuple[list[Point], list[Point], list[LeftOut]]:
    """(the published points, the stored points that are not copies of one, the copies left
    out). A copy (an import of a published result's own logs) has the published point's GPU
    count and score (to COPY_RTOL; the table was scored with the same rules) and, when the
    stored group names a round, that round: it is one measurement, counted once, as the
    published point, which takes the copy's runs' own minutes (the table has only the score),
    so the plan prices that result as the report prices the stored runs."""
    kept: list[Point] = []
    left: list[LeftOut] = []
    out = list(published)
    for p in stored:
        i = next((i for i, q in enumerate(out) if q.gpus == p.gpus and (p.round is None or p.round == q.group)
                  and abs(q.minutes - p.minutes) <= COPY_RTOL * q.minutes), None)
        if i is None:
            kept.append(p)
            continue
        twin = out[i]
        if p.run_minutes and not twin.run_minutes:
            out[i] = twin.model_copy(update={"run_minutes": p.run_minutes})
        left.append(LeftOut(gpus=p.gpus, minutes=p.minutes, label=p.label,
                            reason=f"a stored copy of the published {twin.label} (same GPU count and "
                                   f"score): counted once, as the published point"))
    return out, kept, left


def published_points(bench: str, gpu: str,
                     rows: Iterable[PublishedResult]) -> tuple[list[Point], list[LeftOut]]:
    """The published points of one series (see the module docstring for the choice)."""
    left: list[LeftOut] = []
    candidates = []
    for r in rows:
        if r.benchmark_key != bench or r.gpu != gpu:
            continue
        reason = ("open division" if r.division != "closed" else
                  f"category {r.category}" if r.category != "available" else
                  f"{r.result_files} of {r.runs_required} result files" if not r.complete else "")
        if reason:
            left.append(_left(r, reason))
        else:
            candidates.append(r)
    fastest: dict[int, float] = {}
    for r in candidates:
        fastest[r.accelerators] = min(fastest.get(r.accelerators, r.score_minutes), r.score_minutes)
    best: dict[tuple[int, str], PublishedResult] = {}
    for r in sorted(candidates, key=lambda r: (r.score_minutes, r.org, r.system)):
        if r.score_minutes > TUNED_FACTOR * fastest[r.accelerators]:
            left.append(_left(r, f"more than {TUNED_FACTOR:g}x the fastest at {r.accelerators} GPUs "
                                 f"({fastest[r.accelerators]:.3f} min): not a tuned recipe"))
        elif (r.accelerators, r.round) in best:
            left.append(_left(r, f"a faster {r.round} result at {r.accelerators} GPUs is used"))
        else:
            best[(r.accelerators, r.round)] = r
    points: list[Point] = []
    for r in sorted(best.values(), key=lambda r: (round_key(r.round), r.accelerators)):
        earlier = next((p for p in points if p.gpus == r.accelerators
                        and abs(p.minutes - r.score_minutes) <= _SAME_SCORE_RTOL * r.score_minutes), None)
        if earlier is not None:
            left.append(_left(r, f"the same score as {earlier.label}: republished, counted once"))
            continue
        points.append(Point(gpus=r.accelerators, nodes=r.nodes, minutes=r.score_minutes, group=r.round,
                            source="published", label=_label(r), by=f"{r.round} {r.submitter}", round=r.round,
                            scaling_factor=r.scaling_factor or 1.0))
    points.sort(key=lambda p: (p.gpus, group_order(p.group)))
    return points, left


def stored_points(bench: str, gpu: str,
                  results: Sequence[ResultRow]) -> tuple[list[Point], list[LeftOut]]:
    """One point per stored (system, round, submitter) group of `bench` on `gpu` with a score."""
    groups: dict[tuple[str, str, str], list[ResultRow]] = defaultdict(list)
    for r in results:
        if canonical_benchmark(r.benchmark) == bench and catalog_gpu(r.sku) == gpu:
            groups[(r.system or "unknown", r.round or "", r.submitter or "")].append(r)
    points: list[Point] = []
    left: list[LeftOut] = []
    for (system, round_name, submitter), rows in sorted(groups.items()):
        label = "stored: " + "/".join(p for p in (round_name, submitter, system) if p)
        gpus = _mode(r.gpus for r in rows)
        try:
            score = time_to_train(rows, bench)
        except ConfigError as exc:
            left.append(LeftOut(gpus=gpus, minutes=None, label=label, reason=exc.message))
            continue
        if not gpus or score.value_minutes is None:
            reason = "GPU count unknown" if not gpus else f"no score: {score.note}"
            left.append(LeftOut(gpus=gpus, minutes=None, label=label, reason=reason))
            continue
        if score.value_minutes <= 0:  # run_stop at run_start: ln 0 has no place on a log-log fit
            left.append(LeftOut(gpus=gpus, minutes=score.value_minutes, label=label,
                                reason=f"a score of {score.value_minutes:g} minutes"))
            continue
        kinds = sorted({r.source for r in rows})
        note = "; ".join(filter(None, [f"{len(rows)} stored result(s) ({', '.join(kinds)})",
                                       "official" if score.official else score.note]))
        by = " ".join(part for part in ("stored", round_name, submitter) if part)
        points.append(Point(gpus=gpus, nodes=_mode(r.nodes for r in rows), minutes=score.value_minutes,
                            by=by, round=round_name or None, scaling_factor=score.scaling_factor,
                            run_minutes=[r.minutes for r in launch_order(rows) if not r.resumed],
                            group=STORED, source="stored", label=label, note=note))
    return sorted(points, key=lambda p: p.gpus), left


def check_benchmark(benchmark: str) -> str:
    """The benchmark's current key, or a ConfigError naming the known ones."""
    bench = canonical_benchmark(benchmark.strip().lower())
    known = {r.benchmark_key for r in load_published()} | {canonical_benchmark(b) for b in metrics.REQUIRED_RUNS}
    if bench not in known:
        raise ConfigError(f"unknown benchmark '{benchmark[:60]}'",
                          hint=f"known: {', '.join(sorted(known))}")
    return bench


def stored_keys(bench: str) -> list[str]:
    """The benchmark names a stored result of `bench` may carry (its key and older aliases such
    as "gnn" for "rgat"): what to ask the store for."""
    return [bench, *(old for old, new in BENCHMARK_ALIASES.items() if new == bench)]


def _label(r: PublishedResult) -> str:
    return f"{r.round} {r.submitter} {r.system}"


def _left(r: PublishedResult, reason: str) -> LeftOut:
    return LeftOut(gpus=r.accelerators, minutes=r.score_minutes, label=_label(r), reason=reason)


def _mode(values: Iterable[int | None]) -> int | None:
    counts: dict[int, int] = defaultdict(int)
    for v in values:
        if v:
            counts[v] += 1
    return max(counts, key=lambda v: (counts[v], v)) if counts else None
