"""`azbench fabric locate` (issue 46 points 1 and 2): the plan's rounds and judgement (pure), the use
case over a stub launcher, the dry run at 2,048 VMs, the local cluster's per-node links and their
faults, then the command on real 16-node local clusters: one with node7's link shaped to 20 Mbit/s
(named, and no other node), one clean (none named)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.models import Cluster, NodeInfo
from orchestrator.providers.local import links as netlinks
from orchestrator.runs.locate import locate_cluster as locate
from orchestrator.fabric.locate_plan import (Collective, conclude, controls, estimate, judge, judge_against, pairs,
                                             repairs, round_reference)
from orchestrator.seams import Access
from tests.cli_helpers import azbench, azbench_in_process


# -- the plan ------------------------------------------------------------------------------------

def test_pairs_are_a_perfect_matching_and_cross_racks_on_nvl72() -> None:
    nodes = [f"n{i}" for i in range(1, 8)]
    matched, left = pairs(nodes)
    assert matched == [("n1", "n2"), ("n3", "n4"), ("n5", "n6")] and left == ["n7"]
    racks = {"r1": ["a1", "a2"], "r2": ["b1", "b2"]}
    matched, left = pairs(["a1", "a2", "b1", "b2"], racks)
    assert matched == [("a1", "b1"), ("a2", "b2")] and left == []


def test_a_node_is_named_only_when_slow_in_its_pair_and_again_with_a_good_partner() -> None:
    round2 = [Collective(nodes=("n1", "n2"), kind="pair", busbw=0.1), Collective(nodes=("n3", "n4"), kind="pair", busbw=0.09),
              Collective(nodes=("n5", "n6"), kind="pair", busbw=0.002), Collective(nodes=("n7", "n8"), kind="pair", busbw=0.02)]
    median = judge(round2, None)
    slow = [t for t in round2 if t.slow]
    assert [t.nodes for t in slow] == [("n5", "n6"), ("n7", "n8")]  # n7+n8: noise below half the median
    good = [n for t in round2 if t.slow is False for n in t.nodes]
    [again] = repairs(slow, good, [])
    assert [t.nodes for t in again] == [("n5", "n1"), ("n6", "n2"), ("n7", "n3"), ("n8", "n4")]
    for t, value in zip(again, (0.002, 0.1, 0.08, 0.09)):
        t.busbw = value
    judge_against(again, median, None)
    suspects, unconfirmed = conclude(slow, again)
    assert [s.node for s in suspects] == ["n5"] and "known-good n1" in suspects[0].evidence
    assert len(unconfirmed) == 1 and "n7+n8" in unconfirmed[0] and "not named" in unconfirmed[0]


def test_a_failed_collective_is_slow_and_one_that_measured_nothing_is_not_judged() -> None:
    tests = [Collective(nodes=("a", "b"), kind="pair", busbw=1.0), Collective(nodes=("c", "d"), kind="pair", error="rc 1"),
             Collective(nodes=("e", "f"), kind="pair")]
    judge(tests, None)
    assert [t.slow for t in tests] == [False, True, None]


def test_the_rows_pair_figure_is_a_floor_beside_the_median() -> None:
    tests = [Collective(nodes=("a", "b"), kind="pair", busbw=390.0), Collective(nodes=("c", "d"), kind="pair", busbw=395.0)]
    judge(tests, 400.0)
    assert all(t.slow for t in tests) and tests[0].floor == 400.0


def test_2048_gb200_vms_take_four_rounds_of_minutes() -> None:
    plan = estimate(2048, 4, 16, 16 * 2 ** 30, 937.0, None)
    assert len(plan.rounds) == 4 and plan.racks == 128 and 120 < plan.wall_s < 600
    assert [t for _, t, _ in plan.rounds] == [0, 128, 1024, 2]


def test_dry_run_prints_the_rounds_and_time_without_a_cluster(tmp_path: Path) -> None:
    done = azbench_in_process("fabric", "locate", "--dry-run", "--sku", "gb200", "--count", "2048", "-o", "json",
                              home=tmp_path)
    assert done.code == 0, done.err
    plan = json.loads(done.out)
    assert plan["rounds"] <= 4 and plan["racks"] == 128 and plan["wall_s"] < 600
    assert "assumed" in plan["basis"] and plan["plan"][2]["tests"] == 1024


# -- the use case over a stub launcher ------------------------------------------------------------

class _Stub:
    """A launcher whose collectives print nccl-tests' table with a busbw per node set."""

    backend = "stub"

    def __init__(self, nodes: int, slow: Mapping[str, float], down: Sequence[str] = ()) -> None:
        self.nodes = [f"node{i}" for i in range(1, nodes + 1)]
        self.slow, self.down = slow, set(down)
        self.groups: list[list[tuple[str, ...]]] = []
        self.drained: dict[str, str] = {}

    def node_states(self) -> dict[str, NodeInfo]:
        return {n: NodeInfo(name=n, state="down" if n in self.down else "idle") for n in self.nodes}

    racks: dict[str, list[str]] = {}

    def leaf_switches(self) -> dict[str, list[str]]:
        return self.racks

    def stage_file(self, local: Path, remote: str) -> None:
        assert local.is_file()

    def drain(self, reasons: Mapping[str, str]) -> None:
        self.drained.update(reasons)

    def run_groups(self, groups: Sequence[Sequence[str]], argv: Sequence[str], *, gpus_per_node: int,
                   timeout_s: float) -> list[str]:
        self.groups.append([tuple(g) for g in groups])
        out = []
        for g in groups:
            busbw = min([self.slow.get(n, 0.1) for n in g])
            out.append("# nThread 1 nGpus 0 minBytes 1048576 maxBytes 1048576 step: 2(factor)\n"
                       f"#  Rank  0 Group  0 Pid 1 on {g[0]} device 0 [cpu] cpu\n"
                       f"#  Rank  1 Group  0 Pid 2 on {g[1]} device 0 [cpu] cpu\n"
                       "#       size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
                       f"     1048576  262144  float  sum  -1  N/A  N/A  N/A  N/A  10.0  {busbw}  {busbw}  0\n")
        return out


def test_re_pairs_on_a_busier_host_are_judged_against_their_own_known_good_pairs() -> None:
    """Load that arrives after the pairs round slows every re-pair: its known-good pairs, run
    beside them, lower the reference, so only the node that is slow against them is named."""
    pair_round = [Collective(nodes=(f"n{i}", f"n{i + 1}"), kind="pair", busbw=0.1) for i in range(1, 12, 2)]
    pair_round[0].busbw = 0.03  # n1+n2 slow by chance
    median = judge(pair_round, None)
    slow = [t for t in pair_round if t.slow]
    good = [n for t in pair_round if t.slow is False for n in t.nodes]
    [again] = repairs(slow, good, [])
    checks = controls(again, good)
    assert [t.nodes for t in checks] == [("n5", "n6"), ("n7", "n8"), ("n9", "n10")]
    for t in again + checks:
        t.busbw = 0.04  # the whole round at 40 % of the pairs round: the host got busier
    assert round_reference(median, checks) == 0.04 and round_reference(median, []) == median
    judge_against(again, round_reference(median, checks), None)
    assert conclude(slow, again)[0] == []  # judged against the median alone, n1 and n2 were named
    judge_against(again, median, None)
    assert [s.node for s in conclude(slow, again)[0]] == ["n1", "n2"]


def _access(stub: _Stub, node_control: bool = True) -> Access:
    from orchestrator.seams import Capabilities
    return Access(launcher=stub, shell=None,  # type: ignore[arg-type]
                  caps=Capabilities(health_gate=True, node_control=node_control), python="python3",
                  notes=["stub links"])


def _cluster(nodes: int) -> Cluster:
    return Cluster(name="c", provider="fake", sku="Local_CPU", nodes=nodes, workdir="/tmp/x")


def test_locate_names_the_slow_node_in_three_rounds_and_drains_only_when_asked() -> None:
    stub = _Stub(16, {"node7": 0.002})
    report = locate(_cluster(16), _access(stub))
    assert [s.node for s in report.suspects] == ["node7"] and len(report.rounds) == 3 and report.tests == 13  # 8 pairs, 2 re-pairs, 3 controls
    assert stub.groups[0] == [(f"node{i}", f"node{i + 1}") for i in range(1, 16, 2)] and not stub.drained
    assert report.notes == ["stub links"]
    drained = locate(_cluster(16), _access(stub), drain_found=True)
    assert drained.drained == ["node7"] and list(stub.drained) == ["node7"]
    assert stub.drained["node7"].startswith("azbench: fabric locate slow")


def test_a_down_node_is_named_by_the_per_node_check_and_left_out_of_the_pairs() -> None:
    stub = _Stub(6, {}, down=["node2"])
    report = locate(_cluster(6), _access(stub))
    assert [s.node for s in report.suspects] == ["node2"] and "node state down" in report.suspects[0].evidence
    assert all("node2" not in g for g in stub.groups[0]) and len(stub.groups) == 2  # node6 left over, re-paired


def test_a_clean_fleet_names_none_in_two_rounds() -> None:
    report = locate(_cluster(16), _access(_Stub(16, {})))
    assert report.suspects == [] and len(report.rounds) == 2 and report.tests == 8


def test_on_nvl72_sizes_a_collective_per_rack_comes_first_then_pairs_across_racks() -> None:
    from orchestrator.fabric.locate import locate as rounds
    stub = _Stub(8, {"node6": 0.002})
    stub.racks = {"r1": stub.nodes[:4], "r2": stub.nodes[4:]}
    cluster = Cluster(name="c", provider="fake", sku="gb200", nodes=8, workdir="/tmp/x")
    report = rounds(cluster, _access(stub))
    assert [r.kind for r in report.rounds] == ["per-node", "racks", "pairs", "re-pairs"]
    assert stub.groups[0] == [tuple(stub.nodes[:4]), tuple(stub.nodes[4:])]
    assert stub.groups[1] == [("node1", "node5"), ("node2", "node6"), ("node3", "node7"), ("node4", "node8")]
    assert [s.node for s in report.suspects] == ["node6"]
    assert any("inside the rack of node5..node8" in u and "not named" in u for u in report.unconfirmed)
    assert "GPU and HCA counts not checked (no probe)" in report.rounds[0].notes


# -- the local cluster's links ------------------------------------------------------------------

def test_link_faults_parse_and_bad_ones_are_one_line() -> None:
    faults = netlinks.parse_faults("node7=rate 20mbit; node9=rate 1gbit delay 5ms", ["node7", "node9"])
    assert faults["node7"].rate == "20mbit" and faults["node9"].delay == "5ms"
    for bad, says in (("node7=speed 2", "is not rate"), ("node7", "is not NODE="), ("node99=rate 1mbit", "no node node99"),
                      ("node7=rate fast", "is not rate")):
        with pytest.raises(ConfigError) as exc:
            netlinks.parse_faults(bad, ["node7", "node9"])
        assert says in exc.value.message and "\n" not in exc.value.message


def test_without_namespaces_the_notes_say_the_links_could_not_be_shaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.providers.local import provider as P
    from orchestrator.providers.local.cluster import LocalState
    monkeypatch.setattr(netlinks, "unavailable", lambda: "not root: network namespaces need CAP_SYS_ADMIN")
    state = LocalState(name="x", cluster_dir=str(tmp_path), runtime_dir=str(tmp_path), conf="c", workdir="w",
                       jobcomp_file="j", nodes=["node1", "node2"], cpus_per_node=1, slurmctld_port=1, node_ports={})
    P._build_links(state, netlinks.parse_faults("node2=rate 20mbit"), {})
    notes = P._link_notes(state.links)
    assert not state.links.built and not (tmp_path / "bin" / "python").exists()
    assert notes[0].startswith("links not built: not root") and "could not be shaped" in notes[1]


# -- on real local clusters ---------------------------------------------------------------------

needs_links = pytest.mark.skipif(netlinks.unavailable() is not None, reason=netlinks.unavailable() or "")


def _locate_on(home: Path, nodes: int, faults: str | None) -> dict[str, Any]:
    """`up`, `fabric locate -o json`, then the site (its ranked list is in the report's
    "located" key: home/site/fabric.html), then `down`."""
    env = {netlinks.FAULTS_VAR: faults} if faults else {netlinks.LINKS_VAR: "1"}
    up = azbench("up", "--provider", "local", "--name", "loc", "--nodes", str(nodes), home=home, env=env)
    if up.code == 3:
        pytest.skip(up.err.strip())
    assert up.code == 0, up.err
    try:
        done = azbench("fabric", "locate", "-o", "json", home=home, timeout=900)
        assert done.code in (0, 10), done.err
        report: dict[str, Any] = json.loads(done.out)
        site = azbench("report", "--html", str(home / "site"), home=home)
        assert site.code == 0, site.err
        return report
    finally:
        assert azbench("down", "loc", home=home).code == 0


@pytest.mark.integration
@needs_links
def test_a_20_mbit_link_on_node7_is_named_and_no_other_node(tmp_path: Path) -> None:
    report = _locate_on(tmp_path / "home", 16, "node7=rate 20mbit")
    assert [s["node"] for s in report["suspects"]] == ["node7"], json.dumps(report, indent=1)
    assert isinstance(report["rounds"], int) and report["rounds"] <= 4
    assert any("own link" in n for n in report["notes"])
    page = (tmp_path / "home" / "site" / "fabric.html").read_text()
    ranked = page.split('<ol class="ranked">', 1)[1].split("</ol>", 1)[0]
    assert ranked.count("<li>") == report["tests"] and "node7" in ranked.split("</li>", 1)[0]


@pytest.mark.integration
@needs_links
def test_a_clean_16_node_cluster_names_none(tmp_path: Path) -> None:
    report = _locate_on(tmp_path / "home", 16, None)
    assert report["suspects"] == [], json.dumps(report, indent=1)
    assert isinstance(report["rounds"], int) and report["rounds"] <= 4
