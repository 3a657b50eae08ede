"""A window split into labelled pieces: each instant takes the label of the highest-priority
interval covering it; what nothing covers is `fill` (goodput's `unattributed`).

The pieces tile the window exactly, so their seconds add up to its length whatever the inputs:
intervals are clipped to the window, empty or reversed ones are dropped (clocks of different
machines may disagree by a little), and ties go to the interval given first. Times are epoch
seconds (floats); pure, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass(frozen=True)
class Interval:
    """A source's claim that [start, end) was `label` (in attempt `attempt`'s lane, caused by
    the failure of attempt `origin`, of class `cause`); a higher `priority` wins where claims
    overlap."""

    label: str
    start: float
    end: float
    priority: int = 0
    attempt: int | None = None
    cause: str | None = None
    origin: int | None = None


@dataclass(frozen=True)
class Piece:
    label: str
    start: float
    end: float
    attempt: int | None = None
    cause: str | None = None
    origin: int | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


def partition(intervals: Sequence[Interval], lo: float, hi: float, fill: str,
              lane: Iterable[tuple[float, float, int]] = ()) -> list[Piece]:
    """[lo, hi) as pieces (see the module); a piece nothing claims is `fill`, in the lane of the
    (start, end, attempt) window of `lane` it lies in, else of the last window before it."""
    if hi <= lo:
        return []
    starts: dict[float, list[int]] = defaultdict(list)
    ends: dict[float, list[int]] = defaultdict(list)
    points = {lo, hi}
    for i, iv in enumerate(intervals):
        a, b = max(iv.start, lo), min(iv.end, hi)
        if b > a:
            starts[a].append(i)
            ends[b].append(i)
            points.update((a, b))
    windows = sorted(lane)
    active: set[int] = set()
    pieces: list[Piece] = []
    ordered = sorted(points)
    for a, b in zip(ordered, ordered[1:]):
        active.difference_update(ends.get(a, ()))
        active.update(starts.get(a, ()))
        if active:
            iv = intervals[max(active, key=lambda i: (intervals[i].priority, -i))]
            piece = Piece(iv.label, a, b, iv.attempt, iv.cause, iv.origin)
        else:
            piece = Piece(fill, a, b, _lane_at(windows, a))
        last = pieces[-1] if pieces else None
        if last is not None and _key(last) == _key(piece):
            pieces[-1] = Piece(last.label, last.start, b, last.attempt, last.cause, last.origin)
        else:
            pieces.append(piece)
    return pieces


def _key(p: Piece) -> tuple[str, int | None, str | None, int | None]:
    return p.label, p.attempt, p.cause, p.origin


def _lane_at(windows: Sequence[tuple[float, float, int]], t: float) -> int | None:
    found = None
    for start, _, attempt in windows:
        if start <= t:
            found = attempt
    return found


def totals(pieces: Iterable[Piece], labels: Sequence[str]) -> dict[str, float]:
    """Seconds per label, every one of `labels` listed (zeros included), in that order."""
    out = dict.fromkeys(labels, 0.0)
    for p in pieces:
        out[p.label] = out.get(p.label, 0.0) + p.seconds
    return out


def epoch(when: datetime) -> float:
    return when.timestamp()


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)
