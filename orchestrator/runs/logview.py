"""`azbench logs`: a run's train.log, from the fetched copy or live from the cluster.

Yields text chunks; with `follow`, keeps reading new bytes until the run reaches a final state.
"""

from __future__ import annotations

import shlex
import time
from typing import Callable, Iterator

from orchestrator import paths
from orchestrator.errors import NotFoundError
from orchestrator.models import FINAL_RUN_STATES as FINAL
from orchestrator.runs.access import runner_for
from orchestrator.store.database import Store


def stream_log(store: Store, run_id: str, *, attempt: int | None = None, follow: bool = False,
               interval: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run '{run_id}'", hint="see `azbench status`")
    attempts = store.list_attempts(run_id)
    number = attempt or (attempts[-1].attempt if attempts else 1)
    local = paths.run_dir(run_id) / f"attempt-{number}" / "train.log"
    if local.exists() and run.state in FINAL:
        yield local.read_text(errors="replace")
        return
    row = store.get_cluster(run.cluster)
    if row is None:
        raise NotFoundError(f"cluster '{run.cluster}' of run {run_id} is not in the store")
    runner = runner_for(row.cluster)
    remote = f"{run.run_dir}/attempt-{number}/train.log"
    offset = 0
    try:
        while True:
            out = runner.run(f"tail -c +{offset + 1} {shlex.quote(remote)} 2>/dev/null || true",
                             timeout=30).stdout
            if out:
                offset += len(out.encode())
                yield out
            current = store.get_run(run_id)
            if not follow or current is None or current.state in FINAL:
                return
            sleep(interval)
    finally:
        runner.close()
