"""After a spot eviction: get the capacity back, put the evicted nodes back into Slurm.

The run's next attempt resumes from the newest checkpoint like any retry; this module only makes
sure there are nodes to resume on. The cluster's provider restores what it can
(`restore_capacity(cluster, nodes)`: Azure grows each GPU scale set back to its planned size or
starts the deallocated VMs, waiting at most azure.spot_restore_timeout; the local provider
restarts the emulated nodes' slurmd), then the nodes the spot agent drained are resumed. A
provider without `restore_capacity` (ssh) leaves the nodes to their owner.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from orchestrator.errors import AzbenchError
from orchestrator.runs.failures import Failure

if TYPE_CHECKING:
    from orchestrator.runs.attempts import AttemptContext
    from orchestrator.store.schema import RunRow


def recover(ctx: AttemptContext, row: RunRow, failure: Failure) -> str | None:
    """None once capacity is back and the evicted nodes are resumed; else why the run stops."""
    from orchestrator.clusters.providers import get_provider
    restore = getattr(get_provider(ctx.cluster.provider), "restore_capacity", None)
    hosts: list[str] = []
    if restore is not None:
        try:
            hosts = restore(ctx.cluster, nodes=failure.suspects)
        except AzbenchError as exc:
            return exc.message
    if failure.suspects:
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(ctx.cluster.env.items()))
        names = shlex.quote(",".join(failure.suspects))
        ctx.runner.run(f"{exports}scontrol update NodeName={names} State=RESUME", timeout=60)
    ctx.event(row, "spot_restore", f"evicted {', '.join(failure.suspects) or 'nodes'}: capacity "
              f"{'restored' if restore else 'left to the cluster'}, nodes resumed in Slurm",
              nodes=list(failure.suspects), hosts=hosts)
    return None
