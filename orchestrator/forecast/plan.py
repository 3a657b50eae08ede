"""The planner: predicted time-to-train, cost and quota of one benchmark on one VM size, over
node counts, before anyone pays for a run (`azbench plan`).

For each node count: the predicted score with its 80% interval (model, loo), how far it lies
past the measured GPU counts, the cost per result (runs required x predicted minutes
x nodes x the list price per VM-hour, results.definitions.cost_per_result; unknown, with the
catalog's reason, where the catalog has no price), the cost per hour, strong-scaling efficiency against the table's smallest count, and
the quota a request needs (nodes x the size's vCPUs, in its quota family). Cost per result is
results.definitions.cost_per_result, the report's figure, with each of the runs a score needs at
its predicted wall time: the predicted score / its RCP factor, or, at a count where runs were
measured, those runs' own wall times scaled by the predicted over the measured score (a slow
run the score drops still costs, as in the report). Node counts: those
asked, else the recipe's published scales and a ladder of powers of two (whole NVL72 racks of
18 VMs on GB200), within MAX_EXTRAPOLATION of the measured range. A target time marks the
count with the fewest VM-hours (the cheapest: a price is per VM-hour) whose prediction meets
it; a budget the fastest count whose predicted cost fits. Counts asked beyond MAX_EXTRAPOLATION
are refused unless `extrapolate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.explain.account import PlanExplain, plan_explain
from orchestrator.forecast import record
from orchestrator.forecast.basis import MAX_EXTRAPOLATION, Band, Basis
from orchestrator.forecast.model import Fit
from orchestrator.forecast.points import STORED, Point, SeriesPoints, group_order
from orchestrator.forecast.series import fitted_series
from orchestrator.hardware.catalog import GpuSku
from orchestrator.hardware.layout import default_vms_per_rack, rack_sizes, scale_set_layout
from orchestrator.models import Frozen
from orchestrator.results import metrics
from orchestrator.results.definitions import cost_per_result
from orchestrator.store.schema import ResultRow
from orchestrator.recipes.catalog import get_recipe
from orchestrator.results.published import load_published

WIDER_SCAN = 4.0  # with `extrapolate`, target and budget scans reach this much further still

Mark = Literal["target", "target at the upper bound", "budget"]


@dataclass(frozen=True)
class PlanRequest:
    """What `azbench plan` asks: `nodes` None means the default counts."""

    benchmark: str
    sku: str
    nodes: tuple[int, ...] | None = None
    target_minutes: float | None = None
    budget_usd: float | None = None
    extrapolate: bool = False
    stored: Sequence[ResultRow] = field(default_factory=tuple)
    prices: Mapping[str, float] = field(default_factory=dict)  # size name -> USD per VM-hour (--price)
    params: tuple[tuple[str, str], ...] = ()  # -p KEY=VALUE for the step model's config
    cross_domain_gbs: float | None = None  # --cross-domain-gbs for the step model


class PlanRow(Frozen):
    """One node count: prediction, interval, extrapolation, cost, scaling and quota."""

    nodes: int
    gpus: int
    racks: int | None = None
    vms_per_rack: int | None = None
    minutes: float
    low: float
    high: float
    extrapolation: float
    position: Literal["measured", "inside", "above", "below"]
    stands_on: str
    measured_minutes: float | None = None
    measured_by: str | None = None
    measured_who: str | None = None
    cost_per_result_usd: float | None = None
    cost_per_result_low_usd: float | None = None
    cost_per_result_high_usd: float | None = None
    cost_per_hour_usd: float | None = None
    scaling_factor: float = Field(1.0, description="the RCP scaling factor in the predicted "
                                  "score: each run's predicted wall time is minutes / it")
    scaling_from: str = Field("", description="the measured score whose factor it is")
    measured_cost_per_result_usd: float | None = Field(None, description="the measured score's "
        "cost per result, as the report prices it: a stored one's runs each at its own minutes, "
        "a published one's at its score / its scaling factor")
    vm_hours_per_result: float
    strong_scaling: float | None = None
    vcpus: int
    quota_family: str
    why: str
    marks: list[Mark] = []
    explain: PlanExplain | None = None  # the step model's view of this count (explain.account)
    model_vs_curve: str = ""  # said where the two disagree by more than their intervals


class Answer(Frozen):
    """The answer to --target-minutes or --budget: the count chosen (None: none qualifies)."""

    asked: float
    nodes: int | None
    text: str


class ForecastPlan(Frozen):
    """Everything `azbench plan` prints: a table of rows and the basis every row stands on
    (not models.Plan, which is a cluster's provisioning plan)."""

    benchmark: str
    sku: str
    sku_short: str
    gpu: str
    gpus_per_node: int
    runs_required: int
    price_per_vm_hour_usd: float | None
    price_note: str
    basis: Basis
    rows: list[PlanRow]
    target: Answer | None = None
    target_upper: Answer | None = None
    budget: Answer | None = None
    comparisons: list[str] = []
    notes: list[str] = []


def make_plan(request: PlanRequest) -> ForecastPlan:
    """The plan for `request`; ConfigError (one line) for bad input or a refused count."""
    fitted = fitted_series(request.benchmark, request.sku, request.stored)
    sku, gpu, bench, series = fitted.sku, fitted.gpu, fitted.benchmark, fitted.points
    runs = runs_required(bench)
    ctx = _Context(request=request, sku=sku, series=series, fit=fitted.fit, band=fitted.band, runs=runs)
    counts = _requested(ctx) if request.nodes else _default_counts(ctx)
    target, upper = _target(ctx) if request.target_minutes is not None else (None, None)
    budget = _budget(ctx) if request.budget_usd is not None else None
    for answer in (target, upper, budget):
        if answer is not None and answer.nodes is not None and answer.nodes not in counts:
            counts.append(answer.nodes)
    rows = _rows(ctx, sorted(set(counts)), {"target": target, "target at the upper bound": upper,
                                            "budget": budget})
    price = ctx.price
    return ForecastPlan(benchmark=bench, sku=sku.name, sku_short=sku.short, gpu=gpu, gpus_per_node=sku.gpus_per_vm,
                runs_required=runs, price_per_vm_hour_usd=price, price_note=_price_note(sku, ctx.price),
                basis=fitted.basis(), rows=rows, target=target, target_upper=upper,
                budget=budget, comparisons=comparisons(series, gpu), notes=_notes(ctx))


def runs_required(bench: str) -> int:
    """The runs MLPerf requires for a score of `bench`: results.metrics' count, else the most the
    published table asks of it (benchmarks of older rounds such as maskrcnn and rnnt)."""
    return metrics.required_runs(bench) if bench in metrics.REQUIRED_RUNS else _runs_from_table(bench)


def comparisons(series: SeriesPoints, gpu: str) -> list[str]:
    """Measured speedups of other catalog GPUs at equal GPU counts, only where both were measured:
    the newest round both have at that count, else each one's fastest (and it says so)."""
    out = []
    for other in record.all_series():
        if other.benchmark != series.benchmark or other.gpu == gpu:
            continue
        for gpus in sorted({p.gpus for p in series.points} & {p.gpus for p in other.points}):
            a, b, same = _pair([p for p in series.points if p.gpus == gpus],
                               [p for p in other.points if p.gpus == gpus])
            out.append(f"at {gpus:,} GPUs: {gpu} {a.minutes:.2f} min ({a.label}) vs {other.gpu} "
                       f"{b.minutes:.2f} min ({b.label}): {gpu} {metrics.speedup(b.minutes, a.minutes):.2f}x as fast"
                       + ("" if same else " (different rounds)"))
    return out


# -- the rows ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Context:
    request: PlanRequest
    sku: GpuSku
    series: SeriesPoints
    fit: Fit
    band: Band
    runs: int

    def gpus(self, nodes: int) -> int:
        return nodes * self.sku.gpus_per_vm

    @property
    def price(self) -> float | None:
        """USD per VM-hour: --price for this size, else the catalog's list price."""
        return self.request.prices.get(self.sku.name, self.sku.price_per_hour_usd)

    def allowed(self, nodes: int, factor: float = MAX_EXTRAPOLATION) -> bool:
        return self.fit.extrapolation(self.gpus(nodes)) <= factor * (1 + 1e-9)

    def vm_hours(self, nodes: int) -> float:
        """VM-hours of the runs a score needs, each at its predicted wall time."""
        factor = _scaling(self.series.points, self.gpus(nodes))[0]
        return self.runs * self.fit.minutes(self.gpus(nodes)) / factor / 60.0 * nodes

    @property
    def scan_factor(self) -> float:
        return MAX_EXTRAPOLATION * (WIDER_SCAN if self.request.extrapolate else 1.0)


def _rows(ctx: _Context, counts: list[int], answers: dict[Mark, Answer | None]) -> list[PlanRow]:
    base = counts[0] if counts else 1
    t_base = ctx.fit.minutes(ctx.gpus(base))
    rows = []
    for nodes in counts:
        marks: list[Mark] = [m for m, a in answers.items() if a is not None and a.nodes == nodes]
        rows.append(_row(ctx, nodes, marks, t_base * ctx.gpus(base)))
    return rows


def _row(ctx: _Context, nodes: int, marks: list[Mark], base_gpu_minutes: float) -> PlanRow:
    sku, gpus = ctx.sku, ctx.gpus(nodes)
    minutes, low, high = ctx.band.interval(ctx.fit, gpus)
    position, stands_on = _stands_on(ctx.fit, gpus)
    measured = _measured(ctx.series.points, gpus)
    price = ctx.price
    per_hour = nodes * price if price is not None else None
    factor, factor_from = _scaling(ctx.series.points, gpus)
    cost = [cost_per_result(_run_minutes(m, factor, measured, ctx.runs), ctx.runs, nodes, price).usd
            if price is not None else None for m in (minutes, low, high)]
    racks, per_rack = _racks(sku, nodes)
    measured_cost = None
    if measured is not None and price is not None:
        minutes_each = measured.run_minutes or [measured.minutes / measured.scaling_factor] * ctx.runs
        measured_cost = cost_per_result(minutes_each, ctx.runs, nodes, price).usd
    model = plan_explain(ctx.series.benchmark, sku.name, nodes, dict(ctx.request.params),
                         ctx.request.cross_domain_gbs)
    return PlanRow(
        nodes=nodes, gpus=gpus, racks=racks, vms_per_rack=per_rack, minutes=minutes, low=low, high=high,
        extrapolation=ctx.fit.extrapolation(gpus), position=position, stands_on=stands_on,
        measured_minutes=measured.minutes if measured else None,
        measured_by=measured.label if measured else None, measured_who=measured.by if measured else None,
        cost_per_result_usd=cost[0], cost_per_result_low_usd=cost[1], cost_per_result_high_usd=cost[2],
        cost_per_hour_usd=per_hour, scaling_factor=factor, scaling_from=factor_from,
        measured_cost_per_result_usd=measured_cost,
        vm_hours_per_result=ctx.vm_hours(nodes),
        strong_scaling=metrics.strong_scaling_efficiency(base_gpu_minutes, 1, minutes, gpus),
        vcpus=nodes * sku.vcpus, quota_family=sku.quota_family, why=_why(ctx, nodes), marks=marks,
        explain=model, model_vs_curve=_disagreement(model, minutes, low, high))


def _run_minutes(score: float, factor: float, measured: Point | None, runs: int) -> list[float | None]:
    """The wall times of the runs a predicted `score` needs, as the report prices them (each run
    at its own wall time): where runs were measured at this count, theirs scaled by the predicted
    over the measured score, so their spread (a slow run the olympic mean drops still costs) is
    kept; elsewhere each at the score / its RCP factor."""
    if measured is not None and measured.run_minutes and measured.minutes > 0:
        ratio = score / measured.minutes
        return [m * ratio if m is not None else None for m in measured.run_minutes]
    return [score / factor] * runs


def _disagreement(model: PlanExplain, minutes: float, low: float, high: float) -> str:
    """A sentence where the model's band and the curve's interval do not overlap, else ""."""
    if model.model_minutes is None or model.model_low is None or model.model_high is None:
        return ""
    if model.model_high < low or model.model_low > high:
        return (f"the step model ({model.model_minutes:.1f} min [{model.model_low:.1f}-{model.model_high:.1f}]) "
                f"and the curve ({minutes:.1f} min [{low:.1f}-{high:.1f}]) disagree beyond their intervals")
    return ""


def scaling_order(points: Sequence[Point]) -> list[Point]:
    """The points in the order a tie of distance is broken: stored first, then the newest round,
    then the fastest (what the site's script receives: CurveData.scaling)."""
    return sorted(points, key=lambda p: (p.group != STORED, tuple(-k for k in group_order(p.group)[1]),
                                         p.minutes, p.gpus))


def _scaling(points: Sequence[Point], gpus: int) -> tuple[float, str]:
    """The RCP scaling factor of the measured score nearest `gpus` (log distance; ties:
    scaling_order), and that score's label; 1.0 without points."""
    import math
    best: Point | None = None
    far = math.inf
    for p in scaling_order(points):
        d = abs(math.log(p.gpus / gpus))
        if d < far:
            best, far = p, d
    if best is None:
        return 1.0, ""
    return best.scaling_factor, f"{best.label} ({best.gpus:,} GPUs)"


def _stands_on(fit: Fit, gpus: int) -> tuple[Literal["measured", "inside", "above", "below"], str]:
    scales = fit.scales
    if gpus in scales:
        return "measured", f"{gpus:,} GPUs measured"
    if gpus > fit.high:
        return "above", f"{gpus / fit.high:.1f}x past {fit.high:,} GPUs"
    if gpus < fit.low:
        return "below", f"{fit.low / gpus:.1f}x below {fit.low:,} GPUs"
    below = max(s for s in scales if s < gpus)
    above = min(s for s in scales if s > gpus)
    return "inside", f"between {below:,} and {above:,} GPUs"


def _measured(points: Sequence[Point], gpus: int) -> Point | None:
    """The score measured at `gpus`: a stored one first, else the newest round's."""
    here = [p for p in points if p.gpus == gpus]
    stored = [p for p in here if p.group == STORED]
    return min(stored or here, key=lambda p: p.minutes) if stored else \
        (max(here, key=lambda p: (group_order(p.group), -p.minutes)) if here else None)


def _racks(sku: GpuSku, nodes: int) -> tuple[int | None, int | None]:
    """(racks, VMs per rack) as `up` would lay them out (hardware.layout), None without racks."""
    if sku.nvlink_domain_vms <= 1:
        return None, None
    per_rack = default_vms_per_rack(nodes, sku)
    return (nodes // per_rack, per_rack) if per_rack else (None, None)


def _why(ctx: _Context, nodes: int) -> str:
    asked = ctx.request.nodes or ()
    reasons = ["asked"] if nodes in asked else []
    if nodes in _recipe_scales(ctx):
        reasons.append("recipe scale")
    if not reasons and nodes in _ladder(ctx, ctx.scan_factor):
        reasons.append("racks" if ctx.sku.nvlink_domain_vms > 1 else "ladder")
    return ", ".join(reasons) or "answer"


# -- node counts -------------------------------------------------------------------------------

def _requested(ctx: _Context) -> list[int]:
    """The counts asked: each valid for the size and within reach, else a one-line ConfigError."""
    for nodes in ctx.request.nodes or ():
        check_nodes(ctx.sku, nodes)
        if not ctx.request.extrapolate and not ctx.allowed(nodes):
            raise ConfigError(_refusal(ctx, nodes), hint="pass --extrapolate to see it anyway")
    return list(ctx.request.nodes or ())


def check_nodes(sku: GpuSku, nodes: int) -> None:
    """A node count the size can have (GB200: whole racks of 18 or of 16, or one partial rack
    below 18, as hardware.layout lays them out); ConfigError if not."""
    if nodes < 1:
        raise ConfigError(f"--nodes: node counts must be at least 1, got {nodes}")
    try:
        scale_set_layout("plan", nodes, sku)
    except ConfigError as exc:
        raise ConfigError(f"--nodes {nodes}: {exc.message}", hint=exc.hint) from None


def _refusal(ctx: _Context, nodes: int) -> str:
    fit, gpus = ctx.fit, ctx.gpus(nodes)
    where = (f"{gpus / fit.high:.1f}x the largest measured scale ({fit.high:,} GPUs)" if gpus > fit.high
             else f"{fit.low / gpus:.1f}x below the smallest measured scale ({fit.low:,} GPUs)")
    return (f"--nodes {nodes}: {gpus:,} GPUs is {where} of {ctx.series.benchmark} on {ctx.sku.short}; "
            f"predictions stop at {MAX_EXTRAPOLATION:g}x")


def _default_counts(ctx: _Context) -> list[int]:
    counts = set(_recipe_scales(ctx)) | set(_ladder(ctx, MAX_EXTRAPOLATION))
    reach = ctx.scan_factor if ctx.request.extrapolate else MAX_EXTRAPOLATION
    return sorted(n for n in counts if ctx.allowed(n, reach))


def _ladder(ctx: _Context, factor: float) -> list[int]:
    """Powers of two of a step (a full NVL72 rack on GB200, else one node) within reach."""
    step = ctx.sku.nvlink_domain_vms if ctx.sku.nvlink_domain_vms > 1 else 1
    out, n = [], step
    while ctx.gpus(n) <= ctx.fit.high * factor:
        if ctx.allowed(n, factor):
            out.append(n)
        n *= 2
    return out


def _recipe_scales(ctx: _Context) -> list[int]:
    """The node counts the recipe lists for this size (none for a benchmark without a recipe)."""
    try:
        recipe = get_recipe(ctx.series.benchmark)
    except NotFoundError:
        return []
    return [c.nodes for c in recipe.scales_for(ctx.sku.name)]


def _candidates(ctx: _Context) -> list[int]:
    """Every valid node count within the scan's reach (GB200: multiples of 16 and of 18)."""
    top = int(ctx.fit.high * ctx.scan_factor // ctx.sku.gpus_per_vm)
    counts = {n for step in rack_sizes(ctx.sku) for n in range(step, top + 1, step)}
    return sorted(n for n in counts if ctx.allowed(n, ctx.scan_factor))


# -- target and budget -------------------------------------------------------------------------

def _target(ctx: _Context) -> tuple[Answer, Answer]:
    goal = ctx.request.target_minutes or 0.0
    counts = _candidates(ctx)
    meets = [n for n in counts if ctx.fit.minutes(ctx.gpus(n)) <= goal]
    safe = [n for n in counts if ctx.band.interval(ctx.fit, ctx.gpus(n))[2] <= goal]
    return _choose(ctx, goal, meets, "predicted"), _choose(ctx, goal, safe, "at the interval's upper end")


def _choose(ctx: _Context, goal: float, counts: list[int], how: str) -> Answer:
    if not counts:
        best = min(_candidates(ctx) or [1], key=lambda n: ctx.fit.minutes(ctx.gpus(n)))
        t = ctx.fit.minutes(ctx.gpus(best))
        return Answer(asked=goal, nodes=None,
                      text=f"no count up to {max(_candidates(ctx) or [1]):,} nodes meets {goal:g} min {how}; "
                           f"the fastest is {best:,} nodes at {t:.1f} min")
    nodes = min(counts, key=lambda n: (ctx.vm_hours(n), n))
    minutes, low, high = ctx.band.interval(ctx.fit, ctx.gpus(nodes))
    return Answer(asked=goal, nodes=nodes,
                  text=f"{goal:g} min {how}: {nodes:,} nodes ({ctx.gpus(nodes):,} GPUs), "
                       f"{minutes:.1f} min [{low:.1f}-{high:.1f}], the fewest VM-hours that meet it")


def _budget(ctx: _Context) -> Answer:
    budget = ctx.request.budget_usd or 0.0
    price = ctx.price
    if price is None:
        raise ConfigError(f"--budget needs a price: {ctx.sku.short} has none in the catalog "
                          f"({_price_note(ctx.sku)}): give --price {ctx.sku.name}=USD")
    fits = [n for n in _candidates(ctx) if ctx.vm_hours(n) * price <= budget]
    if not fits:
        cheapest = min(_candidates(ctx) or [1], key=ctx.vm_hours)
        return Answer(asked=budget, nodes=None,
                      text=f"no count fits ${budget:,.0f}: the cheapest predicted result is "
                           f"${ctx.vm_hours(cheapest) * price:,.0f} on {cheapest:,} nodes")
    nodes = min(fits, key=lambda n: (ctx.fit.minutes(ctx.gpus(n)), n))
    return Answer(asked=budget, nodes=nodes,
                  text=f"${budget:,.0f}: {nodes:,} nodes is the fastest within it, "
                       f"{ctx.fit.minutes(ctx.gpus(nodes)):.1f} min for ${ctx.vm_hours(nodes) * price:,.0f} "
                       f"per result")


# -- text ----------------------------------------------------------------------------------------

def _price_note(sku: GpuSku, price: float | None = None) -> str:
    if price is not None and price != sku.price_per_hour_usd:
        return f"${price:,.2f} per VM-hour, given (--price)"
    if sku.price_per_hour_usd is None:
        return f"unknown: {sku.price_source}"
    where = next((part.strip().removeprefix("price:").strip() for part in sku.notes.split(";")
                  if "price" in part), "list price")
    return f"${sku.price_per_hour_usd:,.2f} per VM-hour, list-price estimate (catalog: {where})"


def _notes(ctx: _Context) -> list[str]:
    notes = [f"cost per result = the {ctx.runs} runs one MLPerf score of {ctx.series.benchmark} "
             "needs, each at its predicted wall time (the predicted score / the RCP scaling "
             "factor of the nearest measured score, scaling_factor), x nodes x price (the "
             "report's cost per result, docs/figures.md); it leaves out initialisation before "
             "run_start, data staging, queueing and failed runs"]
    if ctx.series.stored:
        notes.append(f"predictions are at the level of your {len(ctx.series.stored)} stored result(s) "
                     "(they take precedence over the published level)")
    skipped = [n for n in _recipe_scales(ctx) if not ctx.allowed(n, ctx.scan_factor)]
    for n in skipped:
        notes.append(f"recipe scale {n:,} nodes left out: {_refusal(ctx, n)}")
    return notes


def _runs_from_table(bench: str) -> int:
    runs = {r.runs_required for r in load_published() if r.benchmark_key == bench}
    return max(runs) if runs else 1


def _pair(mine: Sequence[Point], theirs: Sequence[Point]) -> tuple[Point, Point, bool]:
    """Two points at one GPU count: of the newest round both have, else each side's fastest."""
    rounds = sorted({p.group for p in mine} & {p.group for p in theirs}, key=group_order)
    if rounds:
        return (min((p for p in mine if p.group == rounds[-1]), key=lambda p: p.minutes),
                min((p for p in theirs if p.group == rounds[-1]), key=lambda p: p.minutes), True)
    return min(mine, key=lambda p: p.minutes), min(theirs, key=lambda p: p.minutes), False
