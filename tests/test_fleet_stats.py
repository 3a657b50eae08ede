"""The health gate's robust statistics (runs/fleet_stats.py) and per-SKU baselines: deterministic."""

from __future__ import annotations

import math

import pytest

from orchestrator.hardware.catalog import lookup
from orchestrator.runs.fleet import GateOptions, Probe, check_fleet
from orchestrator.runs.fleet_stats import (
    MAD_SCALE,
    OutlierRule,
    center,
    confirmed,
    controls,
    score,
    suspects,
)


def _fleet(n: int, spread: float, **odd: float) -> dict[str, float]:
    """n values around 100 with a deterministic +-spread pattern, then the odd ones."""
    values = {f"n{i}": 100.0 * (1 + spread * math.sin(i * 1.7)) for i in range(1, n + 1)}
    return {**values, **odd}


def test_center_is_median_and_scaled_mad_and_ignores_outliers():
    c = center([10, 11, 12, 13, 14, 1000, math.nan])
    assert c is not None and c.median == 12.5 and c.n == 6
    assert c.sigma == pytest.approx(MAD_SCALE * 1.5)  # |dev| = 2.5 1.5 .5 .5 1.5 987.5 -> 1.5
    assert center([1.0, 2.0]) is None  # no spread from two values


def test_sigma_floor_keeps_identical_values_from_flagging_a_small_dip():
    values = {f"n{i}": 100.0 for i in range(20)} | {"dip": 97.0}
    found, c = suspects(values, OutlierRule(min_effect=0.0))
    assert c is not None and c.sigma == pytest.approx(2.0)  # 2 % of the median, MAD being 0
    assert found == []  # z = -1.5


def test_a_node_needs_both_the_z_limit_and_the_effect_floor():
    quiet = _fleet(256, 0.01, slow=80.0)  # MAD tiny: z huge, effect -20 %
    found, _ = suspects(quiet, OutlierRule(min_effect=0.15))
    assert [s.node for s in found] == ["slow"]
    assert suspects(quiet, OutlierRule(min_effect=0.25))[0] == []  # under the floor
    noisy = _fleet(256, 0.30, slow=70.0)  # a wide spread: -30 % is within the fleet's noise
    assert suspects(noisy, OutlierRule(min_effect=0.15))[0] == []


def test_a_node_at_half_speed_or_worse_is_a_suspect_however_wide_the_spread():
    noisy = _fleet(256, 0.30, crawl=40.0, limp=60.0)  # -60 % and -40 %, both within 4 sigmas
    found, c = suspects(noisy)
    assert c is not None and (40.0 - c.median) / c.sigma > -OutlierRule().z_limit  # z alone: no
    assert [s.node for s in found] == ["crawl"]  # the gross floor (-50 %) names it; limp stays
    assert suspects(noisy, OutlierRule(gross_effect=1.0))[0] == []  # without the floor: neither
    with pytest.raises(ValueError, match="gross_effect"):
        OutlierRule(min_effect=0.3, gross_effect=0.2)


def test_a_fixed_fraction_would_flag_the_noisy_fleet_but_the_z_score_does_not():
    noisy = _fleet(256, 0.30)
    median = sorted(noisy.values())[128]
    assert any(v < 0.75 * median for v in noisy.values())  # the old 25 % rule's false positive
    assert suspects(noisy)[0] == []


def test_lower_is_better_scores_flip_sign():
    times = _fleet(50, 0.01, late=200.0)
    found, _ = suspects(times, OutlierRule(higher_is_better=False))
    assert [s.node for s in found] == ["late"] and found[0].effect == pytest.approx(-1.0, abs=0.02)


def test_controls_are_the_nodes_closest_to_the_median_never_a_suspect():
    values = {"a": 1.0, "b": 5.0, "c": 5.1, "d": 4.9, "e": 9.0, "s": 5.0}
    assert controls(values, ["s"], 3) == ["b", "c", "d"]
    assert controls(values, [], 0) == []


def test_confirmation_needs_an_outlier_in_every_reprobe_against_that_probes_reference():
    rule = OutlierRule()
    fleet = center(list(_fleet(256, 0.02).values()))
    assert fleet is not None
    first = score("s", 50.0, fleet, rule)
    ref = ["r1", "r2", "r3"]
    slow_twice = [{"s": 52.0, "r1": 100, "r2": 99, "r3": 101}, {"s": 49.0, "r1": 98, "r2": 100, "r3": 101}]
    ok, scores = confirmed(first, fleet, slow_twice, "s", ref, rule)
    assert ok and len(scores) == 3
    # The whole machine slowed down during the second re-probe: the reference slowed as much.
    burst = [slow_twice[0], {"s": 49.0, "r1": 50, "r2": 51, "r3": 52}]
    assert not confirmed(first, fleet, burst, "s", ref, rule)[0]
    # Silent in a re-probe, or no reference measured: not confirmed (nothing measured).
    assert not confirmed(first, fleet, [{"r1": 100, "r2": 100, "r3": 100}], "s", ref, rule)[0]
    assert not confirmed(first, fleet, [{"s": 10.0}], "s", ref, rule)[0]


def test_rule_rejects_nonsense():
    with pytest.raises(ValueError, match="min_effect"):
        OutlierRule(min_effect=1.5)
    with pytest.raises(ValueError, match="z_limit"):
        OutlierRule(z_limit=0)


class _Noisy:
    """256 nodes whose round-1 throughput has a wide, heavy-tailed spread: node7 reads -40 %
    once (a noisy sample), node9 is really at half speed."""

    def __init__(self) -> None:
        self.calls = 0

    def probe(self, nodes):
        self.calls += 1
        out = {}
        for node in nodes:
            k = int(node[4:])
            ops = 5e7 * (1 + 0.08 * math.sin(k * 2.3))
            if node == "node7" and self.calls == 1:
                ops *= 0.6
            if node == "node9":
                ops *= 0.5
            out[node] = Probe(node, 80.0, 20.0, ops, 100.0, True)
        return out


def test_gate_clears_a_noisy_sample_and_confirms_a_slow_node():
    nodes = [f"node{i}" for i in range(1, 257)]
    report = check_fleet(_Noisy(), nodes, {}, GateOptions())
    assert set(report.suspects) == {"node7", "node9"}
    assert [v.node for v in report.verdicts] == ["node9"]
    [v] = report.verdicts
    assert v.check == "throughput" and "all 3 probes" in v.detail and v.value < v.threshold


def test_sku_baselines_are_published_figures_with_their_source():
    h100 = lookup("h100").nccl
    assert h100 is not None and (h100.message, h100.expected_gbps, h100.warn_gbps) == ("16G", 450.0, 400.0)
    assert "ai-infrastructure-on-azure" in h100.source and h100.message_mb == pytest.approx(17179.87, abs=0.01)
    for sku in ("h200", "gb200", "mi300x"):
        base = lookup(sku).nccl
        assert base is not None and "azurehpc-health-checks" in base.source and base.message == "16G"
    assert lookup("local").nccl is None


def test_gpu_gate_options_use_the_baseline_size_and_warn_level():
    from orchestrator.models import Cluster
    from orchestrator.runs.fleet_gate import nccl_args, options_for
    from orchestrator.seams import Access
    cluster = Cluster(name="g", provider="azure", sku="Standard_ND96isr_H100_v5", nodes=2)
    opts = options_for(cluster, Access(launcher=None, shell=None))  # type: ignore[arg-type]
    assert opts.link_gbps == 450.0 and opts.link_gbps * opts.link_fail_fraction == pytest.approx(400.0)
    assert nccl_args(opts)[:4] == ["-b", "16G", "-e", "16G"]
