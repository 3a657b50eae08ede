"""`up` of ND GB200 v6 clusters up to 2,048 VMs against the fake ARM server with 50 ms latency.

Shows that ARM requests grow with the number of scale sets, not VMs (one PUT per scale set,
polls per LRO, no per-VM calls), and the wall time of a full `up`, of an adopting rerun and of
`down`. Prints one JSON line per figure; never asserts. Run: python benchmarks/bench_azure_up.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402
from orchestrator.providers.azure.provider import AzureProvider  # noqa: E402
from orchestrator.providers.azure.clients import AzureClients  # noqa: E402
from orchestrator.specs.cluster import ClusterSpec  # noqa: E402
from testsupport.fake_arm import SUB, FakeArm, StubCredential, allow_plain_http_policy, default_catalogue  # noqa: E402

LATENCY_S = 0.05
POLLING_INTERVAL_S = 0.25
POLLS_TO_FINISH = 2


def one(nodes: int, workers: int) -> None:
    fake = FakeArm(polls_to_finish=POLLS_TO_FINISH, latency_s=LATENCY_S).start()
    default_catalogue(fake, free_vcpus=1_000_000)
    clients = AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                           per_call_policies=[allow_plain_http_policy()], polling_interval=POLLING_INTERVAL_S)
    spec = ClusterSpec(name=f"gb{nodes}", provider="azure", sku="gb200", nodes=nodes, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32"})
    provider = AzureProvider(clients, owner="bench", workers=workers, capacity_wait_s=0)
    plan = provider.plan(spec)
    try:
        for phase in ("up", "rerun"):
            start, before = time.perf_counter(), len(fake.log)
            cluster = provider.up(spec, plan)
            _report(phase, nodes, len(plan.scale_sets), workers, fake.log[before:], time.perf_counter() - start)
        start, before = time.perf_counter(), len(fake.log)
        provider.down(cluster)
        _report("down", nodes, len(plan.scale_sets), workers, fake.log[before:], time.perf_counter() - start)
    finally:
        fake.stop()


def _report(phase: str, nodes: int, sets: int, workers: int, log: list, wall: float) -> None:
    methods = Counter(e.method for e in log)
    polls = sum(1 for e in log if "/operations/" in e.path)
    emit(f"azure_{phase}_gb200", wall, "s", nodes=nodes, scale_sets=sets, workers=workers,
         arm_requests=len(log), requests_per_scale_set=round(len(log) / sets, 1),
         requests_per_vm=round(len(log) / nodes, 3), puts=methods.get("PUT", 0),
         deletes=methods.get("DELETE", 0), lro_polls=polls, latency_ms=int(LATENCY_S * 1000),
         polling_interval_s=POLLING_INTERVAL_S)


def main() -> None:
    os.environ["AZBENCH_HOME"] = tempfile.mkdtemp(prefix="azbench-bench-")
    for nodes in (90, 576, 1152, 2048):
        one(nodes, workers=8)
    one(2048, workers=24)


if __name__ == "__main__":
    main()
