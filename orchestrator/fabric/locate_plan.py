"""Which node makes the fabric slow, in few rounds: the pure plan and judgement of `fabric locate`.

A collective's bus bandwidth says how its group did as a whole, so finding the node (or link)
behind a low figure is a testing problem whose cost is the number of rounds: tests of one round
run side by side on disjoint nodes, so wall time follows rounds, not tests. The plan:

1. per node: what the gate checks on each node alone (node state; GPU and HCA counts on GPU
   sizes), no collective;
2. on multi-VM NVLink sizes (NVL72), one collective inside each rack, all racks at once;
3. pairs, all at once, in a perfect matching (on NVL72 sizes across racks, node i of one rack
   with node i of the next, so each pair crosses the scale-out fabric): each pair's busbw is set
   against the round's median and the row's pair figure;
4. each slow pair re-paired: both of its nodes, each with a node that passed, all at once. A node
   slow again with a good partner is named; a pair whose two nodes are both fine with good
   partners is reported unconfirmed (a transient or the link between those two), never named.
   Up to three known-good pairs run beside the re-pairs: where they are slower than the pairs
   round's median (a busier host), the re-pairs are judged against them instead.

A node is named only on two measurements: its slow pair and its slow re-pair. That keeps a busy
host's spread from naming a healthy node. An odd node out is tested in round 4 with a good one.
Pure: the caller runs each round (runs/locate.py) and hands back the busbw it measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# A pair is slow below this fraction of the round's median busbw. Healthy pairs on one shared
# host spread widely (two cores run every pair's ranks); a faulty link that matters is a
# multiple slower. The row's pair figure, where it has one, is a second floor.
SLOW_FRACTION = 0.5


@dataclass
class Collective:
    """One collective of a round: its nodes, what it measured, and the judgement."""

    nodes: tuple[str, ...]
    kind: str  # "rack", "pair", "re-pair", "control" (known-good beside re-pairs)
    subject: str | None = None  # the node a re-pair tests (the other is a known-good partner)
    busbw: float | None = None
    error: str = ""
    floor: float | None = None
    median: float | None = None
    expected: float | None = None
    slow: bool | None = None  # None: not judged (nothing measured)


@dataclass
class Round:
    index: int
    kind: str  # "per-node", "racks", "pairs", "re-pairs"
    tests: list[Collective] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Suspect:
    node: str
    evidence: str
    busbw: float | None
    expected: float | None


def pairs(nodes: Sequence[str], racks: Mapping[str, Sequence[str]] | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """A perfect matching of `nodes` (consecutive in the order given) and the node left over.
    With `racks` (NVL72 sizes) node i of each rack pairs with node i of the next rack, so every
    pair crosses racks; what cannot be matched that way is matched in order."""
    order = list(nodes)
    if racks and len(racks) > 1:
        members = [[n for n in group if n in set(nodes)] for group in racks.values()]
        out: list[tuple[str, str]] = []
        used: set[str] = set()
        for r in range(0, len(members) - 1, 2):
            for a, b in zip(members[r], members[r + 1]):
                out.append((a, b))
                used |= {a, b}
        rest = [n for n in order if n not in used]
        more, left = pairs(rest)
        return out + more, left
    matched = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
    return matched, order[len(matched) * 2:]


def judge(tests: list[Collective], expected: float | None, fraction: float = SLOW_FRACTION) -> float | None:
    """Mark each test slow or not against the round's median busbw (x `fraction`) and `expected`
    (the row's figure for this kind of group, or None); a test that measured nothing is slow when
    it failed (its error), unjudged otherwise. Returns the median."""
    values = [t.busbw for t in tests if t.busbw is not None and math.isfinite(t.busbw)]
    median = statistics.median(values) if values else None
    floor = None if median is None else median * fraction
    for t in tests:
        t.median, t.expected = median, expected
        t.floor = max(x for x in (floor, expected) if x is not None) if (floor or expected) else None
        if t.busbw is None:
            t.slow = True if t.error else None
        else:
            t.slow = t.floor is not None and t.busbw < t.floor
    return median


def judge_against(tests: list[Collective], reference: float | None, expected: float | None,
                  fraction: float = SLOW_FRACTION) -> None:
    """Re-pairs are judged against the pairs round's median (`reference`), not their own: most
    re-pairs may hold a slow node."""
    floor = None if reference is None else reference * fraction
    for t in tests:
        t.median, t.expected = reference, expected
        t.floor = max(x for x in (floor, expected) if x is not None) if (floor or expected) else None
        t.slow = (True if t.error else None) if t.busbw is None else (t.floor is not None and t.busbw < t.floor)


def repairs(slow: Sequence[Collective], good: Sequence[str], left: Sequence[str]) -> list[list[Collective]]:
    """Re-pair tests for each node of each slow pair (and each node left over), each with a
    distinct known-good partner; split into as few rounds as the good nodes allow."""
    subjects = [n for t in slow for n in t.nodes] + list(left)
    if not good:
        return []
    width = len(good)
    out: list[list[Collective]] = []
    for i in range(0, len(subjects), width):
        chunk = subjects[i:i + width]
        out.append([Collective(nodes=(s, g), kind="re-pair", subject=s) for s, g in zip(chunk, good)])
    return out


# Known-good pairs run beside each round of re-pairs: a host busier than during the pairs round
# slows every test of the later round, and judged against the earlier median alone both nodes of
# a pair that was slow by chance would be named (seen on a 2-core host under load).
CONTROLS = 3


def controls(chunk: Sequence[Collective], good: Sequence[str], most: int = CONTROLS) -> list[Collective]:
    """Up to `most` pairs of known-good nodes that `chunk` does not use, to run beside it."""
    used = {n for t in chunk for n in t.nodes}
    free = [n for n in good if n not in used]
    return [Collective(nodes=(free[i], free[i + 1]), kind="control") for i in range(0, min(len(free) - 1, 2 * most), 2)]


def round_reference(median: float | None, checks: Sequence[Collective]) -> float | None:
    """What a re-pairs round is judged against: the pairs round's median, or its own known-good
    pairs' median where that is lower (the host was busier), so load alone names no node."""
    values = [t.busbw for t in checks if t.busbw is not None and math.isfinite(t.busbw)]
    if not values or median is None:
        return median
    return min(median, statistics.median(values))


def conclude(slow_pairs: Sequence[Collective], retests: Sequence[Collective]) -> tuple[list[Suspect], list[str]]:
    """Suspects (a node slow in its pair and again with a good partner) and unconfirmed findings."""
    by_subject = {t.subject: t for t in retests if t.subject}
    suspects: list[Suspect] = []
    unconfirmed: list[str] = []
    for pair in slow_pairs:
        named = []
        for node in pair.nodes:
            again = by_subject.get(node)
            if again is not None and again.slow:
                named.append(node)
                suspects.append(Suspect(node=node, busbw=again.busbw, expected=again.expected, evidence=(
                    f"pair {'+'.join(pair.nodes)} {_gbps(pair.busbw)} below {_gbps(pair.floor)} "
                    f"(round median {_gbps(pair.median)}); again with known-good {again.nodes[1]}: "
                    f"{_gbps(again.busbw)}" + (f" ({again.error})" if again.error else ""))))
        if not named:
            unconfirmed.append(f"pair {'+'.join(pair.nodes)} was slow ({_gbps(pair.busbw)}), but each node was fine "
                               "with a known-good partner: a transient or the link between those two; not named")
    paired = {n for t in slow_pairs for n in t.nodes}
    for t in retests:
        if t.subject and t.subject not in paired and t.slow:
            suspects.append(Suspect(node=t.subject, busbw=t.busbw, expected=t.expected, evidence=(
                f"odd node out, with known-good {t.nodes[1]}: {_gbps(t.busbw)} below {_gbps(t.floor)}"
                + (f" ({t.error})" if t.error else ""))))
    return suspects, unconfirmed


@dataclass(frozen=True)
class Estimate:
    """What `fabric locate --dry-run` prints: the rounds, tests and wall time from the row."""

    nodes: int
    racks: int
    rounds: list[tuple[str, int, float]]  # (what, tests, seconds)
    basis: str

    @property
    def wall_s(self) -> float:
        return sum(s for _, _, s in self.rounds)


# What one round costs besides the collective itself: starting one job step per group over the
# nodes, and the per-node check's own run. Assumed, not measured at 2,048 VMs: the gate's
# fleet rounds (runs/fleet_gate.py) are of this order; the dry run says so.
STEP_START_S = 60.0
NODE_CHECK_S = 60.0
ITERS, WARMUP = 20, 5


def estimate(nodes: int, gpus_per_vm: int, rack_vms: int, message_bytes: int, rack_gbps: float | None,
             pair_gbps: float | None, slow_pairs: int = 1) -> Estimate:
    """Rounds, tests and seconds for `nodes` VMs: each collective round costs STEP_START_S plus
    (WARMUP + ITERS) all-reduces of `message_bytes` at the row's busbw (algbw = busbw / bus
    factor); re-pairs for `slow_pairs` slow pairs."""
    racks = math.ceil(nodes / rack_vms) if rack_vms > 1 else 0

    def collective(ranks: int, gbps: float | None) -> float:
        if not gbps:
            return STEP_START_S
        factor = 2 * (ranks - 1) / ranks
        return STEP_START_S + (WARMUP + ITERS) * message_bytes / (gbps / factor * 1e9)

    out = [(f"per-node check of {nodes} nodes (node state, GPU and HCA counts; no collective)", 0, NODE_CHECK_S)]
    if racks > 1:
        out.append((f"one all_reduce inside each of {racks} racks", racks, collective(rack_vms * gpus_per_vm, rack_gbps)))
    out.append((f"{nodes // 2} pairs at once" + (" across racks" if racks > 1 else ""), nodes // 2,
                collective(2 * gpus_per_vm, pair_gbps)))
    out.append((f"re-pairs: 2 per slow pair ({slow_pairs} assumed)", 2 * slow_pairs + nodes % 2,
                collective(2 * gpus_per_vm, pair_gbps)))
    basis = (f"{STEP_START_S:g} s to start each round's job steps and {NODE_CHECK_S:g} s for the per-node "
             f"check (assumed), plus {WARMUP}+{ITERS} all-reduces of {message_bytes / 2**30:g} GiB at the row's busbw "
             f"({_gbps(rack_gbps)} in a rack, {_gbps(pair_gbps)} per pair)")
    return Estimate(nodes=nodes, racks=racks, rounds=out, basis=basis)


def _gbps(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.4g} GB/s"


__all__ = ["SLOW_FRACTION", "Collective", "Round", "Suspect", "Estimate", "pairs", "judge", "judge_against", "repairs",
           "conclude", "estimate"]
