"""Money guards for `up`: which providers spend, the cost cap, an owner's budget warning, and
the one-line plan summary.

Pure: everything here works on the plan and the spec (and, for the budget, the spend the caller
read from the store), so the cap and the question come before any credential is read or any
request is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from orchestrator.specs.cluster import Budget, ClusterSpec
from orchestrator.errors import ConfigError
from orchestrator.models import Plan
from orchestrator.providers import names, parts


def spends_money(provider: str) -> bool:
    """True for providers whose `up` starts billing (the ones `up` asks about)."""
    return parts(provider).traits.spends_money


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


def budget_warning(plan: Plan, budget: Budget, owner: str, spent_usd: float, since: datetime | None,
                   unpriced: Sequence[str] = ()) -> str | None:
    """The line `up` warns with when `owner` has spent (`spent_usd`, their clusters in the store
    since `since`, list price) their budget, or when this cluster's most until it deletes itself
    would pass it; None when within it, for an owner with no budget, or a plan that costs
    nothing. A warning only: the cost cap is what refuses."""
    limit = budget.for_owner(owner)
    if limit is None or not spends_money(plan.provider):
        return None
    window = f"since {since:%Y-%m-%d}" if since is not None else "in all"
    skipped = f"; {len(unpriced)} cluster(s) without a price not counted" if unpriced else ""
    head = (f"owner {owner} has spent ~${spent_usd:,.2f} {window} (list price, this home's store{skipped}) "
            f"of a ${limit:,.2f} {budget.label} budget")
    rate = (f"this cluster adds ~${plan.cost_per_hour_usd:,.2f}/h" if plan.cost_per_hour_usd is not None
            else "this cluster's cost per hour is unknown")
    if spent_usd >= limit:
        return f"{head}: over it already; {rate}"
    worst = plan.worst_case_usd
    if worst is not None and spent_usd + worst > limit:
        hours = (limit - spent_usd) / plan.cost_per_hour_usd if plan.cost_per_hour_usd else None
        left = f": the budget runs out after ~{hours:,.1f} h" if hours is not None else ""
        return f"{head}; {rate}, at most ~${worst:,.2f} until it deletes itself{left}"
    return None


def plan_summary(plan: Plan, spec: ClusterSpec) -> str:
    """One line: VMs, GPUs, cost per hour, when the cluster goes away by itself, and the most
    it can cost until then (list price x the hours to its self-expiry)."""
    cost = (f"~${plan.cost_per_hour_usd:,.2f}/h (list price)" if plan.cost_per_hour_usd is not None
            else "unknown cost per hour")
    where = f" in {plan.region}" if plan.region else ""
    return (f"cluster '{plan.cluster}' ({plan.provider}{where}): {plan.nodes:,} x {plan.sku} = "
            f"{plan.total_gpus:,} GPUs, {cost}, {plan.lifetime or 'runs until `azbench down`'}"
            f"{worst_case(plan)}")


def worst_case(plan: Plan) -> str:
    """': at most ~$X until it deletes itself (N h x $Y/h)', or '' when the plan has no bound
    (no price, or nothing but `down` ends it)."""
    if plan.worst_case_usd is None or plan.max_hours is None or plan.cost_per_hour_usd is None:
        return ""
    return (f": at most ~${plan.worst_case_usd:,.2f} until it deletes itself "
            f"({plan.max_hours:g} h x ${plan.cost_per_hour_usd:,.2f}/h)")


def default_name(provider: str | None, user: str | None = None, token: str | None = None) -> str:
    """The cluster name when none is given: the provider's name for one that costs nothing (the
    local demo's `local`), else `azbench-<user>-<4 hex>`, unique, so two people's (or two
    pipelines') clusters never share a default name. The name pattern is ClusterSpec's."""
    import getpass
    import os
    import re
    import secrets
    name = provider or "local"
    if name not in names() or not spends_money(name):
        return name
    try:
        who = user or os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        who = "user"
    who = re.sub(r"[^a-z0-9-]+", "-", who.lower()).strip("-")[:24] or "user"
    return f"azbench-{who}-{token or secrets.token_hex(2)}"
