"""After a spot eviction: get the capacity back, put the evicted nodes back into service.

The run's next attempt resumes from the newest checkpoint like any retry; this module only makes
sure there are nodes to resume on. Where the provider has a `healer` part, it brings
the nodes back (Azure grows each GPU scale set back to its planned size or starts the
deallocated VMs, waiting at most azure.spot_restore_timeout; the local provider restarts the
emulated nodes' daemons); elsewhere the nodes are left to their owner. The provider first waits
for the noticed nodes to be gone: the spot agent acknowledges the notice only after the job has
left, so the job's end reaches azbench before the eviction does, and a node restored (resumed)
in that gap would take the next attempt down with it. Then, where the launcher
has a `nodes` part, the nodes the spot agent drained are resumed, and what happened (resumed,
already in service, or why not) is what the event records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.clusters.lifecycle import parts, restore_capacity
from orchestrator.errors import AzbenchError, ConfigError
from orchestrator.runs.failures import Failure
from orchestrator.store.events import SpotRestoreData

# How long to wait for the eviction after the job has left a noticed node: Azure's Preempt
# notice is 30 s ahead (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, event
# types: "Preempt", minimum notice 30 seconds) and the agent acknowledges by NotBefore - 5 s, so
# the eviction starts within 30 s of the job's end; the rest is for ARM to show it.
EVICTION_WAIT_S = 60.0

if TYPE_CHECKING:
    from orchestrator.runs.attempts import AttemptContext
    from orchestrator.store.schema import RunRow


def recover(ctx: AttemptContext, row: RunRow, failure: Failure) -> str | None:
    """None once capacity is back and the evicted nodes are resumed; else why the run stops."""
    restores = parts(ctx.cluster).healer is not None
    hosts: list[str] = []
    if restores:
        try:
            hosts = restore_capacity(ctx.cluster, failure.suspects, evict_wait_s=EVICTION_WAIT_S)
        except AzbenchError as exc:
            return exc.message
    nodes = ", ".join(failure.suspects) or "nodes"
    capacity = "capacity restored" if restores else "capacity left to the cluster"
    ctx.event(row, "spot_restore", f"evicted {nodes}: {capacity}, {_resume(ctx, failure)}",
              SpotRestoreData(nodes=list(failure.suspects), hosts=hosts))
    return None


def _resume(ctx: AttemptContext, failure: Failure) -> str:
    """Return the evicted nodes to service; what happened, in words for the event."""
    if not failure.suspects:
        return "no node to resume"
    if (nodes := ctx.launcher.parts().nodes) is None:
        return "nodes left to the cluster's scheduler"
    try:
        nodes.resume(failure.suspects)
    except ConfigError:
        return "nodes already in service"
    except AzbenchError as exc:
        return f"nodes not resumed: {exc}"
    return "nodes resumed"
