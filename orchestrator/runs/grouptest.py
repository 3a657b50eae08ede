"""Cornering bad nodes with group collectives: adaptive group testing by halving, rack first.

A collective over a group tells only whether the group as a whole is healthy (NCCL tests print
one bus bandwidth for all its ranks), so finding the one node that makes it slow is a group
testing problem. azbench uses adaptive binary splitting, seeded by the fabric's topology:

- round 1 tests every leaf switch (rack) group at once, in parallel, on disjoint nodes;
- every group that fails is split in two halves, and both halves are tested in the next round
  (in parallel with every other split), down to single nodes.

Why this scheme: bad nodes are few (d << N), and groups tested in one round run side by side on
disjoint nodes, so wall time follows the number of rounds, not the number of tests. Starting from
the racks (the leaf switch is the fault domain a link problem lives in) instead of the whole
cluster saves log2(N/rack) rounds; halving then needs ceil(log2(rack size)) more rounds. With
18-node racks that is at most 6 rounds at any N, against 2*log2(N) = 22 allowed at 2,048 nodes,
and d*2*ceil(log2(rack)) tests beyond the first round. Testing both halves (rather than inferring
the second from the first) keeps the search right when one group holds two bad nodes.

A group of one cannot run a multi-node collective, so a single suspect is tested together with
a node that passed earlier (its "partner"), as one would pair a suspect GPU VM with a known-good
one for NCCL tests. Pure: the caller runs each round and reports the outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True)
class GroupTest:
    """One collective to run: `members` are tested, `partner` (if any) only fills the group."""

    members: tuple[str, ...]
    partner: str | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.members + ((self.partner,) if self.partner else ())


@dataclass(frozen=True)
class GroupOutcome:
    """A group's result: `ok`, and the measured value (bus bandwidth, GB/s) with its threshold."""

    ok: bool
    value: float | None = None
    threshold: float | None = None
    detail: str = ""


@dataclass
class SearchResult:
    """Nodes found bad (with the outcome of their last group), and every round's tests."""

    bad: dict[str, GroupOutcome] = field(default_factory=dict)
    rounds: list[list[tuple[GroupTest, GroupOutcome]]] = field(default_factory=list)

    @property
    def round_count(self) -> int:
        return len(self.rounds)


RoundRunner = Callable[[list[GroupTest]], list[GroupOutcome]]


def search(first: Sequence[Sequence[str]], run_round: RoundRunner, *,
           max_rounds: int = 64) -> SearchResult:
    """Run rounds until every failing group is cut down to single nodes (see module doc)."""
    result = SearchResult()
    good: list[str] = []
    pending = [GroupTest(tuple(g)) for g in first if g]
    while pending and result.round_count < max_rounds:
        outcomes = run_round(pending)
        if len(outcomes) != len(pending):
            raise ValueError(f"round ran {len(pending)} tests but returned {len(outcomes)} outcomes")
        result.rounds.append(list(zip(pending, outcomes)))
        failed = []
        for test, outcome in zip(pending, outcomes):
            if outcome.ok:
                good.extend(test.members)
            elif len(test.members) == 1:
                result.bad[test.members[0]] = outcome
            else:
                failed.append(test.members)
        pending = _split(failed, good)
    return result


def _split(failed: list[tuple[str, ...]], good: list[str]) -> list[GroupTest]:
    """Both halves of every failed group; a half of one node gets a distinct passed partner."""
    halves = [half for members in failed for half in _halves(members)]
    partners = iter(good)
    tests = []
    for half in halves:
        partner = next(partners, None) if len(half) == 1 else None
        tests.append(GroupTest(half, partner))
    return tests


def _halves(members: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    mid = (len(members) + 1) // 2
    return members[:mid], members[mid:]


def racks_of(nodes: Sequence[str], switches: dict[str, list[str]], rack_size: int = 18) -> list[list[str]]:
    """First-round groups: the leaf switches' nodes (only those in `nodes`, in their order);
    nodes no switch lists are grouped by `rack_size` in the given order."""
    wanted = set(nodes)
    groups, placed = [], set()
    for members in switches.values():
        group = [n for n in members if n in wanted and n not in placed]
        if group:
            groups.append(group)
            placed.update(group)
    rest = [n for n in nodes if n not in placed]
    groups += [rest[i:i + rack_size] for i in range(0, len(rest), rack_size)]
    return groups
