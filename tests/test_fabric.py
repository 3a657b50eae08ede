"""`azbench fabric test`: the job as data (plans, scopes), its batch script (golden), the CPU runner
that prints nccl-tests' format, the fabric_results store kind, the report's fabric section and the
site's fabric page; then the command on the real local Slurm cluster."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestrator.hardware.catalog import lookup
from orchestrator.models import Cluster
from orchestrator.paths import templates_dir
from orchestrator.report.build import build_report
from orchestrator.report.fabric_figures import busbw_vs_nodes, busbw_vs_size, size_ticks
from orchestrator.report.render import to_markdown
from orchestrator.fabric import nccltests
from orchestrator.fabric.stored import import_nccl_tests, run_rows, sizes_of
from orchestrator.fabric.nccl_log import parse_log
from orchestrator.fabric.runner import check_collectives, plans, scopes_for
from orchestrator.slurm.fabric import render_fabric_test
from orchestrator.store.database import Store
from orchestrator.store.schema import SCHEMA_VERSION, migrate
from testsupport.golden import check_golden
from tests.cli_helpers import azbench, azbench_in_process, one_line_error

GOLDEN = Path(__file__).parent / "golden"
EXCERPTS = Path(__file__).parent / "data" / "nccl_excerpts"
RUNNER = templates_dir() / "fabric_collectives.py"


def _cluster(sku: str, nodes: int = 4) -> Cluster:
    return Cluster(name="fab", provider="fake", sku=sku, nodes=nodes, node_names=[f"node{i}" for i in range(1, nodes + 1)],
                   workdir="/shared/work")


def _runner() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fabric_collectives", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the job as data and as a batch script ---------------------------------------------------

def test_gpu_plan_sweeps_to_the_baseline_size_with_nccl_debug_and_the_network_profile() -> None:
    row = lookup("h100")
    [plan] = plans(_cluster("Standard_ND96isr_H100_v5"), row, scopes=[("2 nodes", 2, [])],
                   collectives=("all_reduce", "sendrecv"), python="python3", stamp="fab-20260101")
    assert (plan.min_size, plan.max_size, plan.step_factor) == ("8", "16G", 2)  # nccl-tests' README sweep to 16G
    assert plan.tasks_per_node == plan.gpus_per_node == 8 and plan.nccl_tests_dir == "/opt/nccl-tests/build"
    env = dict(plan.env)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv5-topo.xml"
    assert plan.script == "" and plan.output("7") == "/shared/work/azbench-fabric/fab-20260101-0-n2/slurm-7.out"
    check_golden(GOLDEN / "fabric_test.gpu.sbatch", render_fabric_test(plan))


def test_cpu_plan_runs_two_gloo_ranks_per_node_without_a_baseline() -> None:
    row = lookup("local")
    [plan] = plans(_cluster("Local_CPU"), row, scopes=[("inside rack r0", 2, ["node1", "node2"])],
                   collectives=check_collectives(["sendrecv", "all_reduce"]), python="/venv/bin/python",
                   stamp="fab-20260101")
    assert plan.collectives == ("all_reduce", "sendrecv")  # the catalog's order, not the flag's
    assert (plan.tasks_per_node, plan.gpus_per_node, plan.env) == (2, 0, ())
    assert plan.script.endswith("/fabric_collectives.py") and plan.nodelist == ("node1", "node2")
    text = render_fabric_test(plan)
    assert "#SBATCH --overcommit" in text and "#SBATCH --exclusive" not in text and "NCCL_DEBUG" not in text
    check_golden(GOLDEN / "fabric_test.cpu.sbatch", text)


def test_scopes_are_node_counts_then_each_rack_then_across_racks() -> None:
    usable = [f"node{i}" for i in range(1, 7)]
    racks = {"nvl-a": ["node1", "node2", "node3"], "nvl-b": ["node4", "node5", "node6", "node9"]}
    scopes = scopes_for([1, 2], racks, usable)
    assert scopes == [("1 node", 1, []), ("2 nodes", 2, []),
                      ("inside rack nvl-a", 3, ["node1", "node2", "node3"]),
                      ("inside rack nvl-b", 3, ["node4", "node5", "node6"]),  # node9 is not usable
                      ("across 2 racks (one node each)", 2, ["node1", "node4"])]
    with pytest.raises(Exception, match="7 nodes asked, the cluster has 6 usable"):
        scopes_for([7], None, usable)
    with pytest.raises(Exception, match="--collectives: bcast unknown"):
        check_collectives(["all_reduce", "bcast"])


# -- the CPU runner prints what nccl-tests prints ---------------------------------------------

def test_the_runner_applies_performance_md_bus_factors() -> None:
    runner = _runner()
    assert runner.NUMERATOR == nccltests.BUS_FACTOR_NUMERATOR
    for name in nccltests.COLLECTIVES:
        assert runner.bus_factor(name, 8) == nccltests.bus_factor(name, 8)


def test_the_runner_over_three_ranks_checks_and_times_every_collective(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(3):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "3", "SLURM_LOCALID": str(rank % 2),
               "SLURMD_NODENAME": f"node{rank // 2 + 1}", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, str(RUNNER), "--collectives", ",".join(nccltests.COLLECTIVES),
                                       "-b", "1K", "-e", "16K", "-f", "4", "-n", "2"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    text = outs[0][0]
    assert outs[1][0] == outs[2][0] == ""  # rank 0 alone prints
    runs = nccltests.parse_runs(text)
    assert [r.collective for r in runs] == list(nccltests.COLLECTIVES)
    for run in runs:
        assert (run.ranks, run.hosts, run.host_names) == (3, 2, ["node1", "node2"])
        assert run.wrong == 0 and run.avg_busbw is not None and run.gpu == "cpu (gloo)"
        assert [s.size for s in run.sizes] == [1020, 4092, 16380]  # whole elements, a multiple of 3 ranks
        assert all(s.busbw is not None and s.busbw >= 0 for s in run.sizes)
    reduce = runs[0].sizes[0]
    assert reduce.busbw_oop is None and reduce.busbw_ip is not None  # torch's all_reduce works in place
    assert runs[1].sizes[0].busbw_ip is None and runs[1].sizes[0].busbw_oop is not None


# -- the store kind ----------------------------------------------------------------------------

def test_fabric_results_are_their_own_kind_and_a_v4_store_migrates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        migrate(conn, target=4)
    engine.dispose()
    text = (EXCERPTS / "dgx-spark-playbooks-pr103_all_reduce_2node.txt").read_text()
    runs = nccltests.parse_runs(text)
    with Store.open(url) as store:
        assert store.schema_version() == SCHEMA_VERSION  # v4 -> v5 (fabric) and on to the latest
        rows = run_rows(_sha(text), runs, parse_log(text), source="test", device="GPU", cluster="c", sku="Standard_ND96isr_H100_v5",
                        scope="2 nodes", nodes=2, job_id="17")
        assert store.add_fabric_results(rows) == [(1, True)]
        assert store.add_fabric_results(rows) == [(1, False)]  # the same output twice is one result
        [row] = store.list_fabric_results(cluster="c")
        assert (row.collective, row.ranks, row.hosts, row.gpus_per_host, row.wrong) == ("all_reduce", 2, 2, 1, 0)
        assert [(p.size, p.busbw) for p in sizes_of(row)][-1] == (65536, 1.01)
        assert store.list_fabric_results(cluster="other") == []


def test_results_import_takes_an_nccl_tests_output(tmp_path: Path) -> None:
    path = EXCERPTS / "dgx-spark-playbooks-25_all_gather_2node.txt"
    first = azbench_in_process("results", "import", str(path), home=tmp_path)
    assert first.code == 0, first.err
    assert "imported 1 nccl-tests run(s) (all_gather), 0 already stored" in first.out
    again = azbench_in_process("results", "import", str(path), "--json", home=tmp_path)
    assert json.loads(again.out)["duplicates"] == 1
    report = json.loads(azbench_in_process("report", "-o", "json", home=tmp_path).out)
    [line] = report["fabric"]
    assert (line["collective"], line["ranks"], line["hosts"], line["source"]) == ("all_gather", 2, 2, "import")
    assert line["peak_busbw"] == 20.95 and line["busbw"][0]["size"] == 17179869184
    with Store.open(f"sqlite:///{tmp_path / 'azbench.db'}") as store:
        assert import_nccl_tests(store, path).duplicates == 1


# -- the report and the site --------------------------------------------------------------------

def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _gpu_rows(store: Store) -> None:
    """Two H100 groups of 2 full VMs (8 GPUs each): healthy over IB, and over NET/Socket and slow
    (judged at 16G)."""
    ranks = "".join(f"#  Rank {8 * h + g:2d} Group  0 Pid {g} on node{h + 1} device  {g} [0000:01:00] NVIDIA H100 80GB HBM3\n"
                    for h in range(2) for g in range(8))

    def table(busbw: float) -> str:
        return ("# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 1048576 maxBytes 17179869184\n"
                + ranks +
                "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
                f"     1048576        262144     float     sum      -1   100.0   10.48    20.0      0   100.0   10.48    20.0      0\n"
                f" 17179869184    4294967296     float     sum      -1   40000  429.50  {busbw}      0   40000  429.50  {busbw}      0\n"
                "# Avg bus bandwidth    : 200.5\n")
    ib = "node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
    sock = "node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
    for nodes, busbw, net in ((2, 440.0, ib), (4, 380.0, sock)):
        text = table(busbw) + net
        store.add_fabric_results(run_rows(_sha(text), nccltests.parse_runs(text), parse_log(text), source="test", device="GPU",
                                          cluster="gpu", sku="Standard_ND96isr_H100_v5", scope=f"{nodes} nodes",
                                          nodes=nodes))


def test_report_judges_each_run_against_the_catalog_and_draws_both_charts(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'r.db'}") as store:
        _gpu_rows(store)
        rows = store.list_fabric_results()
    report = build_report([], fabric=rows)
    ok, bad = report.fabric
    assert ok.verdict == "ok" and ok.expected is not None and ok.expected.expected_gbps == 450.0
    assert "sku_baselines.md" in ok.expected.source  # the catalog's citation
    assert bad.verdict == "fail" and {c.check: c.status for c in bad.checks} == {
        "transport": "fail", "wrong values": "ok", "busbw": "warn"}
    busbw = next(c for c in bad.checks if c.check == "busbw")
    assert "380 GB/s at 16G (out-of-place), below the warn level 400 GB/s" in busbw.evidence  # not the 200.5 Avg line
    [scaling] = report.fabric_scaling
    assert [(p.nodes, p.busbw, p.verdict) for p in scaling.points] == [(2, 440.0, "ok"), (4, 380.0, "fail")]
    fig = busbw_vs_nodes("all_reduce", report.fabric_scaling)
    assert fig is not None and [t["name"] for t in fig["data"]][1:] == ["expected 450 GB/s", "warn level 400 GB/s"]
    assert "expected 450 GB/s, catalog" in fig["layout"]["title"]["text"]
    size = busbw_vs_size(ok.label, "all_reduce", report.fabric)
    assert size is not None and size["data"][0]["x"] == [1048576.0, 17179869184.0]
    assert size_ticks(8, 16 * 2 ** 30)[0] == 8.0 and len(size_ticks(8, 16 * 2 ** 30)) <= 8
    markdown = to_markdown(report)
    assert "## Fabric (collectives" in markdown and "transport fail: 1 of 1 inter-node channel ends via NET/Socket" in markdown


def test_the_site_has_a_fabric_page_with_its_charts(tmp_path: Path) -> None:
    from orchestrator.report.site import write_site
    with Store.open(f"sqlite:///{tmp_path / 'r.db'}") as store:
        _gpu_rows(store)
        rows = store.list_fabric_results()
    written = write_site(build_report([], fabric=rows), [], tmp_path / "site")
    page = tmp_path / "site" / "fabric.html"
    assert page in written
    text = page.read_text()
    assert 'data-fig="fabric-nodes-all_reduce"' in text and 'data-fig="fabric-size-0-all_reduce"' in text
    assert "NET/Socket" in text and ">fail<" in text
    assert 'href="fabric.html"' in (tmp_path / "site" / "index.html").read_text()
    bare = write_site(build_report([]), [], tmp_path / "bare")
    assert not any(p.name == "fabric.html" for p in bare)


# -- on the real local cluster -------------------------------------------------------------------

@pytest.mark.integration
def test_fabric_test_on_the_local_cluster_stores_three_results_and_the_site_draws_them(azbench_home: Path) -> None:
    up = azbench("up", "--provider", "local", "--name", "fab", "--nodes", "4", home=azbench_home)
    assert up.code == 0, up.err
    try:
        bad = azbench("fabric", "test", "--nodes", "1,9", home=azbench_home)
        assert bad.code == 2 and "9 nodes asked, the cluster has 4 usable" in one_line_error(bad)
        run = azbench("fabric", "test", "--nodes", "1,2,4", "--collectives", "all_reduce", "--poll", "0.3",
                      "-o", "json", home=azbench_home, timeout=900)
        assert run.code == 0, run.err
        outcome = json.loads(run.out)
        assert outcome["device"] == "CPU" and [j["scope"] for j in outcome["jobs"]] == ["1 node", "2 nodes", "4 nodes"]
        assert [(r["ranks"], r["hosts"]) for j in outcome["jobs"] for r in j["runs"]] == [(2, 1), (4, 2), (8, 4)]
        report = json.loads(azbench("report", "-o", "json", home=azbench_home).out)
        fabric = report["fabric"]
        assert len(fabric) == 3
        for line, nodes in zip(fabric, (1, 2, 4)):
            assert {"nodes", "ranks", "hosts", "collective", "busbw"} <= set(line)
            assert (line["nodes"], line["ranks"], line["hosts"], line["collective"]) == (nodes, 2 * nodes, nodes,
                                                                                     "all_reduce")
            assert line["device"] == "CPU" and line["expected"] is None and line["wrong"] == 0
            assert [p["size"] for p in line["busbw"]] == [1024, 4096, 16384, 65536, 262144, 1048576]
        site = azbench_home / "site"
        made = azbench("report", "--html", str(site), home=azbench_home)
        assert made.code == 0, made.err
        page = (site / "fabric.html").read_text()
        assert 'data-fig="fabric-nodes-all_reduce"' in page and 'data-fig="fabric-size-0-all_reduce"' in page
        figures = json.loads(page.split('id="figures">', 1)[1].split("</script>", 1)[0])
        assert [t["x"] for t in figures["fabric-nodes-all_reduce"]["data"]] == [[1, 2, 4]]
    finally:
        assert azbench("down", "fab", home=azbench_home).code == 0


def test_the_fabric_page_draws_every_chart_without_layout_problems(tmp_path: Path) -> None:
    """In a real browser (Debian's chromium), as tests/test_report_site.py checks the other pages."""
    import shutil
    pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is absent")
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("Debian's chromium and chromium-driver are not installed (infra/setup.sh)")
    from orchestrator.report.site import write_site
    from testsupport.site_layout import chromium, page_problems
    with Store.open(f"sqlite:///{tmp_path / 'r.db'}") as store:
        _gpu_rows(store)
        rows = store.list_fabric_results()
    write_site(build_report([], fabric=rows), [], tmp_path / "site")
    driver = chromium(profile=tmp_path / "chrome")
    try:
        problems = page_problems(driver, tmp_path / "site" / "fabric.html")
        drawn = driver.execute_script("return document.querySelectorAll('.chart .main-svg').length")
    finally:
        driver.quit()
    assert problems == [] and drawn >= 2
