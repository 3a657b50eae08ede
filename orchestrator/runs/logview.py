"""`azbench logs`: a run's train.log, from the fetched copy or live from its cluster.

Text goes to a sink as it arrives. A finished run's log comes from the copy azbench fetched;
otherwise the cluster's launcher reads it (`follow`: until the run reaches a final state). Offsets
count the raw bytes read, and the bytes are decoded as one stream, so a character split across
two reads comes out whole and no byte is read twice or skipped.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable

from orchestrator.clusters.lifecycle import connect, reachable
from orchestrator.errors import NotFoundError
from orchestrator.models import FINAL_RUN_STATES as FINAL
from orchestrator.models import JobRef
from orchestrator.paths import RunLayout, local_train_log
from orchestrator.store.database import Store

CHUNK = 1 << 20  # bytes per read of a local copy: a large log is never held whole


def stream_log(store: Store, run_id: str, sink: Callable[[str], None], *, attempt: int | None = None,
               follow: bool = False, interval: float = 1.0,
               sleep: Callable[[float], None] = time.sleep) -> int:
    """Hand the attempt's log (default: the last attempt) to `sink`, piece by piece; returns
    the attempt number read."""
    run = store.get_run(run_id)
    if run is None:
        raise NotFoundError(f"no run '{run_id}'", hint="see `azbench status`")
    attempts = store.list_attempts(run_id)
    number = attempt or (attempts[-1].attempt if attempts else 1)
    local = local_train_log(run_id, number)
    if local.is_file() and run.state in FINAL:  # never a FIFO or a device
        decode = _decoder()
        with local.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                sink(decode(chunk))
        sink(decode(b"", True))
        return number
    row = store.get_cluster(run.cluster)
    if row is None:
        raise NotFoundError(f"cluster '{run.cluster}' of run {run_id} is not in the store")
    reachable(run.cluster, store)  # a deleted cluster says so, in one line, before any login
    job = next((a.job_id for a in attempts if a.attempt == number and a.job_id), None)
    ref = JobRef(cluster=run.cluster, job_id=job or "", run_dir=run.run_dir or "")
    path = RunLayout(run.run_dir or "").train_log(number)
    decode = _decoder()

    def stop() -> bool:
        current = store.get_run(run_id)
        return not follow or current is None or current.state in FINAL

    with connect(row.cluster) as access:
        access.launcher.follow(ref, path, lambda data: sink(decode(data)), stop=stop,
                               interval=interval, sleep=sleep)
    sink(decode(b"", True))
    return number


def _decoder() -> Callable[..., str]:
    """UTF-8 for a byte stream read in pieces; undecodable bytes become U+FFFD."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode
