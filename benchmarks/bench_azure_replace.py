"""ARM requests per replacement and per resize (issue 23), against the fake ARM server.

An ND GB200 v6 cluster of N VMs (default 2,048: 23 scale sets) is brought up against the fake
ARM (VMs not booted: the provider's join wait is off, so only ARM is counted; the boot-mode
e2e in tests/test_azure_e2e.py covers the Slurm side). Then three replacements, one grow by an
NVL72 rack and one shrink by a rack, each figure with its requests by method. Baseline in the
same run: the requests of one `describe` (which every replacement and resize pays once, to
store the cluster as it now is). The point is that a replacement costs a constant number of
requests, not a number that grows with the cluster: requests touch the one scale set that holds
the node (plus describe's one list per set). Prints JSON lines; never asserts.
Run: python benchmarks/bench_azure_replace.py [N]
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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    os.environ["AZBENCH_HOME"] = tempfile.mkdtemp(prefix="azb-azreplace-")
    from orchestrator.providers.azure.provider import AzureProvider
    from orchestrator.providers.azure.clients import AzureClients
    from orchestrator.specs.cluster import ClusterSpec
    from orchestrator.providers.azure.props import AzureProps
    from testsupport.fake_arm import SUB, FakeArm, StubCredential, allow_plain_http_policy, default_catalogue
    fake = FakeArm(polls_to_finish=1).start()
    default_catalogue(fake, free_vcpus=1_000_000)
    clients = AzureClients(credential=StubCredential(), subscription_id=SUB, base_url=fake.base_url,
                           per_call_policies=[allow_plain_http_policy()], polling_interval=0.01)
    spec = ClusterSpec(name="azrep", provider="azure", sku="gb200", nodes=n, region="eastus",
                       azure={"ssh_ingress_cidr": "203.0.113.7/32", "boot_timeout_s": 0, "self_expiry": False})
    provider = AzureProvider(clients, owner="bench", capacity_wait_s=0, join_timeout_s=0)
    try:
        cluster = provider.up(spec, provider.plan(spec))
        sets = len(cluster.properties_as(AzureProps).scale_sets)

        def measure(name: str, call, **extra) -> None:
            before, start = len(fake.log), time.perf_counter()
            call()
            seconds = time.perf_counter() - start
            entries = [e for e in fake.log[before:] if e.path.lower().startswith("/subscriptions/")]
            by = Counter(e.method for e in entries)
            emit(name, len(entries), "requests", by_method=dict(by), seconds=round(seconds, 3),
                 vms=n, scale_sets=sets, **extra)

        measure("azure_describe_requests", lambda: provider.describe("azrep"), note="baseline")
        for node in [cluster.node_names[5], cluster.node_names[n // 2], cluster.node_names[-1]]:
            current = provider.describe("azrep") or cluster  # the stored record, as lifecycle has it

            def replace(node=node, current=current) -> None:
                provider.replace_node(current, node)
                provider.describe("azrep")  # what lifecycle.replace_node stores afterwards
            measure("azure_replace_one_node_requests", replace, node=node,
                    note="read the node's set + delete instances + capacity PATCH + read the set + describe")
        current = provider.describe("azrep") or cluster
        rack = current.properties.rack_size() or 18  # the layout's own racks (16 at 2,048 VMs)
        measure("azure_resize_grow_one_rack_requests", lambda: provider.resize(current, n + rack),
                note="read sets + quota + capacity PATCH per set grown + read + describe", rack_vms=rack)
        current = provider.describe("azrep") or cluster
        remove = current.node_names[-rack:]
        measure("azure_resize_shrink_one_rack_requests", lambda: provider.resize(current, n, remove),
                note="read sets + delete instances per set + describe")
        start = time.perf_counter()
        provider.down(provider.describe("azrep") or cluster)
        emit("azure_replace_bench_down", time.perf_counter() - start, "s")
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
