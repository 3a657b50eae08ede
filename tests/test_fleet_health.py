"""The scale health gate's pure parts: group search, stragglers, probe parsing, verdicts; driven
by a fake prober that models a fabric with chosen slow and bad nodes (no Slurm)."""

from __future__ import annotations

import math

import pytest

from orchestrator.runs.fleet import (
    GateOptions,
    Probe,
    Verdict,
    candidate_nodes,
    check_fleet,
    group_outcome,
    parse_probes,
)
from orchestrator.slurm.states import parse_leaf_switches
from orchestrator.runs.grouptest import GroupOutcome, GroupTest, racks_of, search
from orchestrator.results.stragglers import find_stragglers, spread
from orchestrator.slurm.states import NodeInfo


class FakeFabric:
    """A prober over `n` nodes: slow nodes have half the throughput and link bandwidth, bad
    nodes fail every collective, silent nodes never answer. Records each round's node set."""

    def __init__(self, n: int, slow=(), bad=(), silent=(), noise=0.05, flaky=()) -> None:
        self.nodes = [f"node{i}" for i in range(1, n + 1)]
        self.slow, self.bad, self.silent, self.flaky = set(slow), set(bad), set(silent), set(flaky)
        self.noise = noise
        self.calls: list[list[str]] = []

    def probe(self, nodes):
        self.calls.append(list(nodes))
        out = {}
        for node in nodes:
            if node in self.silent:
                continue
            k = int(node[4:])
            factor = 2.0 if node in self.slow else 1.0
            ops = 5e7 / factor * (1 + self.noise * math.sin(k))  # deterministic +-5 % spread
            if node in self.flaky and len(self.calls) == 1:
                ops /= 3  # one bad sample: the confirmation probe must clear it
            out[node] = Probe(node, 80.0, 20.0, ops, 100.0 / factor, node not in self.bad)
        return out


def test_halving_finds_two_defectives_in_one_rack_within_the_bound():
    nodes = [f"n{i}" for i in range(1, 73)]
    bad = {"n5", "n11"}

    def run_round(tests):
        return [GroupOutcome(not (set(t.nodes) & bad)) for t in tests]

    found = search(racks_of(nodes, {}, 18), run_round)
    assert set(found.bad) == bad
    assert found.round_count <= 1 + math.ceil(math.log2(18)) <= 2 * math.log2(len(nodes))
    # Every test after round 1 holds only nodes of the failing rack (or a passed partner).
    later = [n for tests in found.rounds[1:] for t, _ in tests for n in t.members]
    assert set(later) <= {f"n{i}" for i in range(1, 19)}


def test_a_single_suspect_is_tested_with_a_partner_that_passed():
    bad = {"a3"}

    def run_round(tests):
        return [GroupOutcome(not (set(t.nodes) & bad)) for t in tests]

    found = search([["a1", "a2", "a3", "a4"], ["b1", "b2"]], run_round)
    singles = [t for tests in found.rounds for t, _ in tests if len(t.members) == 1]
    assert singles and all(t.partner in {"a1", "a2", "a4", "b1", "b2"} for t in singles)
    assert list(found.bad) == ["a3"]


def test_round_runner_returning_the_wrong_count_is_an_error():
    with pytest.raises(ValueError, match="returned 0 outcomes"):
        search([["a", "b"]], lambda tests: [])


def test_racks_follow_the_topology_then_fill_by_rack_size():
    switches = {"rack1": ["n1", "n2", "n3"], "rack2": ["n4", "n5"]}
    assert racks_of(["n1", "n2", "n4", "n6", "n7", "n8"], switches, rack_size=2) == [
        ["n1", "n2"], ["n4"], ["n6", "n7"], ["n8"]]


def test_stragglers_are_below_median_by_more_than_the_tolerance():
    values = {"a": 100.0, "b": 98.0, "c": 102.0, "d": 70.0, "e": 76.0, "f": math.nan}
    slow = find_stragglers(values, 0.25)
    assert [s.node for s in slow] == ["d"]  # 76 is 24 % under the median of 98: kept
    assert slow[0].threshold == pytest.approx(98 * 0.75) and slow[0].median == 98
    times = {"a": 1.0, "b": 1.1, "c": 1.6}
    assert [s.node for s in find_stragglers(times, 0.25, higher_is_better=False)] == ["c"]
    sp = spread(times)
    assert sp.slowest == "c" and sp.median == 1.1 and sp.ratio == pytest.approx(1.6 / 1.1)
    with pytest.raises(ValueError):
        find_stragglers(values, 1.5)


def test_probe_lines_parse_with_srun_labels_and_ahc_failures():
    text = "\n".join([
        "0: AZBENCH_PROBE node=node1 disk_gb=80.5 mem_gb=20 ops_per_s=5e+07 link_gbps=100 link=ok",
        "1: AZBENCH_AHC node2 ERROR:  nhc:  Health check failed:  check_gpu_xid: GPU Xid 79 detected",
        "1: AZBENCH_AHC node2 some progress line",
        "1: AZBENCH_PROBE node=node2 disk_gb=nan mem_gb=1.5 ops_per_s=nan link_gbps=50 link=fail",
        "srun: warning: noise"])
    probes = parse_probes(text)
    assert probes["node1"] == Probe("node1", 80.5, 20.0, 5e7, 100.0, True)
    assert probes["node2"].link_ok is False and math.isnan(probes["node2"].disk_gb)
    assert probes["node2"].ahc_failures == ("check_gpu_xid: GPU Xid 79 detected",)


def test_leaf_switches_come_from_scontrol_show_topology():
    text = ("SwitchName=rack1 Level=0 LinkSpeed=1 Nodes=node[1-18]\n"
            "SwitchName=rack2 Level=0 LinkSpeed=1 Nodes=node[19-20]\n"
            "SwitchName=ss1 Level=1 LinkSpeed=1 Nodes=node[1-20] Switches=rack[1-2]\n")
    leaves = parse_leaf_switches(text)
    assert list(leaves) == ["rack1", "rack2"] and leaves["rack2"] == ["node19", "node20"]


def test_a_group_runs_at_its_slowest_link_and_fails_with_a_bad_or_silent_member():
    opts = GateOptions(link_gbps=100, link_fail_fraction=0.75)
    probes = {"a": Probe("a", 1, 1, 1, 100, True), "b": Probe("b", 1, 1, 1, 50, True),
              "c": Probe("c", 1, 1, 1, 100, False)}
    slow = group_outcome(GroupTest(("a", "b")), probes, opts)
    assert (slow.ok, slow.value, slow.threshold) == (False, 50, 75)
    assert group_outcome(GroupTest(("a",), partner="c"), probes, opts).value is None
    assert not group_outcome(GroupTest(("a", "zz")), probes, opts).ok
    assert group_outcome(GroupTest(("a",)), probes, opts).ok


def test_gate_finds_two_slow_and_one_bad_node_and_nothing_else():
    fabric = FakeFabric(256, slow={"node17", "node200"}, bad={"node99"}, flaky={"node50"})
    report = check_fleet(fabric, fabric.nodes, {}, GateOptions())
    flagged = {(v.node, v.check) for v in report.verdicts}
    assert flagged == {("node17", "collective"), ("node200", "collective"), ("node99", "collective"),
                       ("node17", "throughput"), ("node200", "throughput")}
    assert report.bad_nodes == ["node17", "node99", "node200"] and not report.fabric
    assert report.group_rounds <= 2 * math.log2(256)
    slow = next(v for v in report.verdicts if (v.node, v.check) == ("node17", "throughput"))
    assert slow.value < slow.threshold and "median" in slow.detail
    bad = next(v for v in report.verdicts if v.node == "node99")
    assert bad.status == "fail" and bad.value is None and "collective failed" in bad.reason
    # Round 1 probes everyone once; the straggler confirmation re-probes only the suspects.
    # Round 1 probes everyone once; the confirmation re-probes (twice) only the suspects and
    # 8 reference nodes from the middle of the fleet; the flaky node50 is cleared there.
    suspects = {"node17", "node50", "node200"}
    assert fabric.calls[0] == fabric.nodes and set(report.suspects) == suspects
    last, before = set(fabric.calls[-1]), set(fabric.calls[-2])
    assert last == before and suspects <= last and len(last - suspects) == 8


def test_a_silent_node_fails_its_probe_and_many_failures_are_the_fabric():
    fabric = FakeFabric(36, silent={"node3"})
    report = check_fleet(fabric, fabric.nodes, {}, GateOptions())
    assert [(v.node, v.check) for v in report.verdicts] == [("node3", "probe")]
    everyone = FakeFabric(36, bad={f"node{i}" for i in range(1, 37)})
    fabric_report = check_fleet(everyone, everyone.nodes, {}, GateOptions())
    assert "fabric-wide" in fabric_report.fabric


def test_verdict_reason_names_check_value_and_threshold():
    v = Verdict("node17", "throughput", "slow", 2.5e7, 3.7e7, " ops/s", "-50% vs median")
    assert v.reason == "throughput slow: 2.5e+07 ops/s (threshold 3.7e+07 ops/s); -50% vs median"


def test_candidates_skip_drained_nodes_and_check_the_nodes_flag():
    infos = {f"node{i}": NodeInfo(f"node{i}", "idle") for i in range(1, 11)}
    infos["node4"] = NodeInfo("node4", "drained", "azbench: x")
    assert candidate_nodes(infos, None)[:4] == ["node1", "node2", "node3", "node5"]
    assert candidate_nodes(infos, "node[3-5]") == ["node3", "node5"]
    with pytest.raises(Exception, match="node99 not in the cluster"):
        candidate_nodes(infos, "node99")


def test_report_names_the_slowest_node_and_its_spread():
    import json as _json

    from orchestrator.report.build import build_report
    from orchestrator.report.render import to_markdown
    from orchestrator.store.schema import ResultRow
    summary = {"node_step_times": {"node1": 0.010, "node2": 0.011, "node3": 0.030}}
    row = ResultRow(content_hash="h1", source="run", system="local", benchmark="smoke",
                    status="success", converged=True, minutes=1.0, summary_json=_json.dumps(summary))
    report = build_report([row])
    [line] = report.groups[0].run_lines
    assert line.slowest_node == "node3" and line.node_spread == pytest.approx(0.030 / 0.011, abs=1e-3)
    assert "node3 (2.73)" in to_markdown(report)


def test_nccl_round_runs_every_group_in_parallel_and_parses_bus_bandwidth():
    from orchestrator.runs.fleet import parse_nccl_round
    from orchestrator.runs.fleet_gate import NCCL_ARGS, NCCL_TESTS
    from orchestrator.slurm import commands
    from orchestrator.slurm.conf import compress_hostlist
    opts = GateOptions(link_gbps=450.0, gpus_per_node=8)
    tests = [GroupTest(("gpu1", "gpu2", "gpu3")), GroupTest(("gpu9",), partner="gpu1")]
    text = commands.group_steps([compress_hostlist(list(t.nodes)) for t in tests], [len(t.nodes) for t in tests],
                                [NCCL_TESTS, *NCCL_ARGS], partition="gpu", gpus_per_node=8,
                                timeout_s=opts.round_timeout_s, job_name="azbench-nccl")
    sruns = [ln for ln in text.splitlines() if ln.startswith("srun ")]
    assert len(sruns) == 2 and all(ln.endswith("&") for ln in sruns) and "\nwait\n" in text
    assert "--nodelist='gpu[1-3]'" in sruns[0] and "--nodelist='gpu[1,9]'" in sruns[1]
    assert "--ntasks-per-node=8 --gpus-per-node=8" in sruns[0] and "all_reduce_perf -b 16G -e 16G" in sruns[0]
    out = parse_nccl_round(["#  Avg bus bandwidth    : 392.5 \n", ""], opts)
    assert out[0].ok and out[0].value == 392.5 and out[0].threshold == pytest.approx(337.5)
    assert not out[1].ok and out[1].value is None and "failed" in out[1].detail
    assert not parse_nccl_round(["# Avg bus bandwidth : 120.0\n"], opts)[0].ok
    assert commands.split_groups("AZBENCH_GROUP 0\na\nAZBENCH_GROUP 1\nb\nc\n", 2) == ["a\n", "b\nc\n"]


def test_with_nccl_the_search_uses_the_measured_group_bandwidth():
    class NcclFabric(FakeFabric):
        def nccl(self, tests):
            return [GroupOutcome(not set(t.nodes) & self.bad, 400.0, 337.5) for t in tests]

    fabric = NcclFabric(72, bad={"node30"})
    report = check_fleet(fabric, fabric.nodes, {}, GateOptions(collective="nccl", link_gbps=450.0))
    assert [(v.node, v.check) for v in report.verdicts] == [("node30", "collective")]
    none = check_fleet(FakeFabric(72, bad={"node30"}), fabric.nodes, {}, GateOptions(collective="none"))
    assert none.group_rounds == 1 and not none.verdicts  # no collective test: nothing to corner
