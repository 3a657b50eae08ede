"""Money guards for `up`: which providers spend, the cost cap, and the one-line plan summary.

Pure: everything here works on the plan and the spec only, so the cap and the question come
before any credential is read or any request is sent.
"""

from __future__ import annotations

from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError
from orchestrator.models import Plan


def spends_money(provider: str) -> bool:
    """True for providers whose `up` starts billing (the ones `up` asks about)."""
    from orchestrator.providers import capabilities
    return capabilities(provider).spends_money


def cost_cap(spec: ClusterSpec, flag: float | None = None) -> float | None:
    """The cap in force: the lower of --max-cost-per-hour and the spec sections' own caps
    (azure.max_cost_per_hour)."""
    caps = [c for c in (flag, *(s.cost_cap() for s in spec.sections.values())) if c is not None]
    return min(caps) if caps else None


def check_cost_cap(plan: Plan, cap: float | None) -> None:
    """ConfigError when the plan's cost per hour is over `cap`, or unknown while a cap is set."""
    if cap is None or not spends_money(plan.provider):
        return
    if plan.cost_per_hour_usd is None:
        raise ConfigError(f"cluster '{plan.cluster}': no list price is known for {plan.sku}, so the "
                          f"cost cap of ${cap:,.2f}/h cannot be checked", hint="drop the cap to proceed")
    if plan.cost_per_hour_usd > cap:
        raise ConfigError(f"cluster '{plan.cluster}' would cost ~${plan.cost_per_hour_usd:,.2f}/h, over the "
                          f"cap of ${cap:,.2f}/h (--max-cost-per-hour / azure.max_cost_per_hour)",
                          hint="use fewer nodes or a smaller size, or raise the cap")


def plan_summary(plan: Plan, spec: ClusterSpec) -> str:
    """One line: VMs, GPUs, cost per hour and when the cluster goes away by itself."""
    cost = (f"~${plan.cost_per_hour_usd:,.2f}/h (list price)" if plan.cost_per_hour_usd is not None
            else "unknown cost per hour")
    where = f" in {plan.region}" if plan.region else ""
    return (f"cluster '{plan.cluster}' ({plan.provider}{where}): {plan.nodes:,} x {plan.sku} = "
            f"{plan.total_gpus:,} GPUs, {cost}, {plan.lifetime or 'runs until `azbench down`'}")
