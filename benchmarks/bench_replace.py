"""Replacement figures (issue 23): on an emulated local cluster of N nodes (default 2,048), the
gate finds 3 injected bad nodes, drains them, and `replace_drained` replaces each: retire, start
a spare slot's slurmd under a new name, wait for Slurm to show it idle, gate it beside 7 healthy
references. Prints the gate's wall time, each replacement's seconds, and the total; nothing is
asserted. Needs slurm-wlm and munge. Run: python benchmarks/bench_replace.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    home = Path(tempfile.mkdtemp(prefix="azb-replace-"))
    os.environ["AZBENCH_HOME"] = str(home)
    from orchestrator.clusters import lifecycle
    from orchestrator.providers.local.provider import LocalProvider
    from orchestrator.specs.cluster import load_cluster_spec
    from orchestrator.runs import fleet_gate, fleet_replace
    from orchestrator.store.database import Store
    provider = LocalProvider()
    spec = load_cluster_spec(None, {"name": "replace", "nodes": n})
    start = time.perf_counter()
    cluster = provider.up(spec, provider.plan(spec))
    emit(f"replace_local_up_{n}_nodes", time.perf_counter() - start, "s", load=_load())
    bad = [f"node{k}" for k in (5, n // 2, n - 1)]
    os.environ["AZBENCH_HEALTH_BAD_NODES"] = ",".join(bad)
    try:
        with Store.open() as store, lifecycle.connect(cluster) as access:
            store.save_cluster(cluster)
            start = time.perf_counter()
            report = fleet_gate.gate_cluster(cluster, access)
            emit(f"replace_gate_{n}_nodes", time.perf_counter() - start, "s", drained=report.drained,
                 expected=bad, load=_load())
            os.environ.pop("AZBENCH_HEALTH_BAD_NODES")
            start = time.perf_counter()
            healed = fleet_replace.replace_drained(cluster, access, store, fleet_replace.reasons(report))
            total = time.perf_counter() - start
            for r in healed.replacements:
                emit(f"replace_one_node_{n}_nodes", r.seconds, "s", node=r.node, new_node=r.new_node,
                     status=r.status, note="retire + start + join + gate beside 7 references")
            emit(f"replace_{len(healed.replacements)}_nodes_{n}_nodes", total, "s", load=_load(),
                 replaced=[r.new_node for r in healed.replacements if r.status == "replaced"])
            cluster = healed.cluster or cluster
    finally:
        os.environ.pop("AZBENCH_HEALTH_BAD_NODES", None)
        start = time.perf_counter()
        provider.down(cluster)
        emit(f"replace_local_down_{n}_nodes", time.perf_counter() - start, "s")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
