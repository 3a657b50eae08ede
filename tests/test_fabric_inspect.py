"""`azbench fabric inspect` on real outputs: nccl-tests tables and NCCL_DEBUG=INFO logs people
posted in public threads (tests/data/nccl_excerpts/, each cited in its ATTRIBUTION.md), and the
formats nccl-tests' own source prints (src/util.cu, doc/PERFORMANCE.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_FABRIC
from orchestrator.fabric.judge import Expected, busbw_check, expected_for, worst
from orchestrator.fabric.inspection import inspect_text
from orchestrator.fabric.nccl_log import parse_log
from orchestrator.fabric.nccltests import NcclRun, SizeRow, bus_factor, parse_runs, parse_size
from orchestrator.hardware.catalog import lookup
from tests.cli_helpers import azbench_in_process, one_line_error

DATA = Path(__file__).parent / "data" / "nccl_excerpts"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_every_excerpt_is_attributed_to_its_thread() -> None:
    listed = (DATA / "ATTRIBUTION.md").read_text()
    files = sorted(p.name for p in DATA.glob("*.txt"))
    assert files and all(f"| {name} | https://github.com/" in listed for name in files)


def test_a_real_two_node_output_gives_ranks_hosts_and_peak_busbw() -> None:
    # NVIDIA/dgx-spark-playbooks#25: all_gather_perf on hosts "spark" and "spark-3995".
    [run] = parse_runs(_read("dgx-spark-playbooks-25_all_gather_2node.txt"))
    assert (run.collective, run.ranks, run.hosts, run.gpus_per_host) == ("all_gather", 2, 2, 1)
    assert run.host_names == ["spark", "spark-3995"] and run.version == "2.17.6"
    [size] = run.sizes
    assert size.size == 17179869184 == parse_size("16G")
    assert (size.busbw_oop, size.busbw_ip, size.time_us, size.wrong) == (18.94, 20.95, 453650.0, 0)
    assert run.peak is not None and (run.peak.busbw, run.peak.size) == (20.95, 17179869184)
    assert run.avg_busbw is None and run.out_of_bounds == 0  # the thread cuts the Avg line


def test_an_all_reduce_sweep_peaks_at_its_best_size() -> None:
    # NVIDIA/dgx-spark-playbooks#103: four sizes of all_reduce_perf over two hosts.
    [run] = parse_runs(_read("dgx-spark-playbooks-pr103_all_reduce_2node.txt"))
    assert run.collective == "all_reduce" and (run.ranks, run.hosts) == (2, 2)
    assert [s.size for s in run.sizes] == [8192, 16384, 32768, 65536]
    assert [s.busbw for s in run.sizes] == [0.27, 0.53, 0.88, 1.01]  # the better of out/in place
    assert run.peak is not None and (run.peak.busbw, run.peak.size) == (1.01, 65536)
    assert run.wrong == 0 and (run.min_bytes, run.max_bytes) == (8192, 8589934592)


def test_in_place_na_is_not_checked_and_the_file_name_names_the_collective() -> None:
    # NVIDIA/nccl-tests#214: sendrecv on gpu23 and gpu24, in-place #wrong printed as N/A.
    name = "nccl-tests-214_sendrecv_perf_2node.txt"
    [run] = parse_runs(_read(name), name_hint=name)
    assert run.collective == "sendrecv" and run.host_names == ["gpu23", "gpu24"]
    assert all(s.wrong_oop == 0 and s.wrong_ip is None for s in run.sizes) and run.wrong == 0
    assert parse_runs(_read(name))[0].collective is None  # the output itself does not name it


def test_wrong_values_fail_in_an_old_format_table() -> None:
    # NVIDIA/nccl-tests#104: no root column, "error" instead of #wrong, 3e+02 wrong in place.
    report = inspect_text("nccl-tests-104_sendrecv_wrong.txt", _read("nccl-tests-104_sendrecv_wrong.txt"))
    [run] = report.runs
    assert run.collective == "sendrecv" and run.wrong == 300 and run.verdict == "fail" == report.verdict
    [wrong] = [c for c in run.checks if c.check == "wrong values"]
    assert wrong.status == "fail" and "300 wrong element(s)" in wrong.evidence and "37748744 B" in wrong.evidence


def test_processes_that_are_each_rank_zero_are_not_a_two_host_job() -> None:
    # NVIDIA/nccl-tests#107: nccl-tests without MPI under mpirun prints two headers, both rank 0.
    runs = parse_runs(_read("nccl-tests-107_two_rank0.txt"))
    assert [r.collective for r in runs] == ["all_reduce", "all_reduce"]
    assert runs[1].ranks == 1 and runs[1].hosts == 2  # one rank number, two hosts: say so, not "2 ranks"


def test_nccl_info_inside_an_nccl_tests_output_is_read_past_and_read() -> None:
    # NVIDIA/nccl-tests#293: NCCL INFO lines between the rank lines of a two-host run.
    text = _read("nccl-tests-293_2node_with_nccl_info.txt")
    [run] = parse_runs(text)
    assert (run.collective, run.ranks, run.hosts, run.gpu) == ("all_reduce", 2, 2, "NVIDIA A100-PCIE-40GB")
    log = parse_log(text)
    assert log.plugin == "IBext_v8" and log.nccl_version == "2.21.5+cuda12.4" and log.hosts == ["test1", "test2"]
    report = inspect_text("x.txt", text)
    assert report.kind == "nccl-tests+nccl-log" and report.sku is None  # an A100: no catalog size


def test_an_ib_gdr_log_passes() -> None:
    # Azure/aks-rdma-infiniband#36: an Azure InfiniBand node's channels via NET/IB/N/GDRDMA.
    report = inspect_text("ib.txt", _read("aks-rdma-infiniband-pr36_ib_gdr.txt"))
    assert report.verdict == "ok" and report.transport is not None
    assert report.transport.gdr is True and report.transport.channels == {"NET/IB/GDRDMA": 7}
    assert report.transport.network == ["IB (from its channel lines)"]
    [check] = report.checks
    assert check.check == "transport" and check.status == "ok" and "7 via NET/IB/GDRDMA" in check.evidence


def test_a_socket_fallback_fails_from_its_channel_lines() -> None:
    # NVIDIA/nccl#1232 (behind "[N] " labels) and the older "Ring" lines of NVIDIA/nccl#398.
    report = inspect_text("sock.txt", _read("nccl-1232_socket_fallback.txt"))
    [check] = report.checks
    assert report.verdict == "fail" and check.status == "fail"
    assert check.evidence.startswith("8 of 8 inter-node channel ends via NET/Socket")  # SHM lines are not counted
    old = parse_log(_read("nccl-398_ring_socket_old.txt"))
    assert [c.transport for c in old.channels] == ["NET/Socket", "NET/Socket"]  # P2P/IPC rings are intra-node


def test_ib_without_gdr_and_the_hcas_and_plugin_lines() -> None:
    no_gdr = parse_log(_read("nccl-899_ib_without_gdr.txt"))  # NVIDIA/nccl#899
    assert no_gdr.gdr is False and no_gdr.gdr_disabled == ["mlx5_1", "mlx5_2", "mlx5_3"]
    assert {c.transport for c in no_gdr.channels} == {"NET/IB"}
    using = parse_log(_read("nv_peer_memory-56_ib_using.txt"))  # Mellanox/nv_peer_memory#56
    assert using.hcas == ["mlx5_0:1/IB"] and using.plugin == "none" and using.nccl_version == "2.5.6+cuda10.0"
    sock = parse_log(_read("nccl-tests-179_no_ib_device.txt"))  # NVIDIA/nccl-tests#179
    assert sock.networks == ["Socket"] and sock.no_device == ["IB"] and sock.socket_interfaces == ["eno1", "enp1s0"]
    report = inspect_text("s.txt", _read("nccl-tests-179_no_ib_device.txt"))
    assert report.verdict == "not checked"  # "Using network Socket" but no channel line: not guessed


def test_busbw_is_judged_at_the_largest_size_never_the_avg_line() -> None:
    h100 = expected_for(lookup("h100"))
    assert h100 is not None and h100.size == 16 * 2 ** 30 and h100.warn_gbps == 400.0
    # Small sizes drag the average down; the largest size is healthy: ok, whatever the Avg says.
    run = NcclRun(collective="all_reduce", ranks=16, hosts=2, sizes=[
        SizeRow(size=8, busbw_oop=0.0), SizeRow(size=2 ** 30, busbw_oop=430.0)], avg_busbw=215.0)
    assert busbw_check(run, h100).status == "ok"
    # The same run cut at 1G with a slow largest size warns, at the size it names.
    slow = run.model_copy(update={"sizes": [SizeRow(size=8, busbw_oop=0.0), SizeRow(size=2 ** 30, busbw_oop=390.0)]})
    check = busbw_check(slow, h100)
    assert check.status == "warn" and "at 1G (out-of-place), the largest size measured (the baseline's is 16G)" in check.evidence
    # At the baseline's size the baseline's size is judged, even if a larger one was run.
    both = run.model_copy(update={"sizes": [SizeRow(size=16 * 2 ** 30, busbw_oop=380.0),
                                            SizeRow(size=32 * 2 ** 30, busbw_oop=450.0)]})
    assert busbw_check(both, h100).status == "warn" and "at 16G (out-of-place)," in busbw_check(both, h100).evidence
    other = run.model_copy(update={"collective": "all_gather"})
    assert busbw_check(other, h100).status == "not checked"
    assert busbw_check(run, h100, device="CPU").status == "not checked"
    assert worst([busbw_check(slow, h100)]) == "warn"


def test_bus_factors_are_nccl_tests_performance_md() -> None:
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == bus_factor("alltoall", 8) == 7 / 8
    assert bus_factor("sendrecv", 8) == 1.0


def test_cli_warns_with_exit_0_fails_with_its_code_and_emits_json(tmp_path: Path) -> None:
    ok = DATA / "dgx-spark-playbooks-pr103_all_reduce_2node.txt"
    # One GPU per host is one NIC: not comparable with ND H100 v5's 8-GPU figure, and said so.
    single = azbench_in_process("fabric", "inspect", str(ok), "--sku", "h100", home=tmp_path)
    assert single.code == 0, single.err
    assert "[not checked] busbw: not comparable: 1.01 GB/s at 64K (in-place)" in single.out
    assert "the catalog publishes no per-NIC figure" in single.out and "verdict: ok" in single.out
    # 8 MI300X on one host (its GPU names the row): 161.14 GB/s at 8M, below 314: warn, exit 0.
    mi300x = DATA / "hpc-ai-envs-pr30_rccl_mi300x.txt"
    warned = azbench_in_process("fabric", "inspect", str(mi300x), home=tmp_path)
    assert warned.code == 0, warned.err
    assert "[warn] busbw: 161.14 GB/s at 8M (out-of-place), the largest size measured" in warned.out
    assert "verdict: warn" in warned.out
    failed = azbench_in_process("fabric", "inspect", str(ok), str(DATA / "nccl-1232_socket_fallback.txt"),
                                "-o", "json", home=tmp_path)
    assert failed.code == EXIT_FABRIC
    data = json.loads(failed.out)
    assert [d["verdict"] for d in data] == ["ok", "fail"]
    run = data[0]["runs"][0]
    assert {"collective", "ranks", "hosts", "gpus_per_host", "busbw", "peak_busbw", "peak_size",
            "avg_busbw_line", "wrong"} <= set(run)
    assert data[1]["transport"]["channels"] == {"NET/Socket": 8}
    query = azbench_in_process("fabric", "inspect", str(ok), "--query", "[].runs[].peak_busbw", "-o", "tsv",
                               home=tmp_path)
    assert query.out.strip() == "1.01"


@pytest.mark.parametrize("content, why", [
    ("hello\nworld\n", "neither an nccl-tests output"),
])
def test_a_file_that_is_neither_is_one_line_exit_2(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(content)
    result = azbench_in_process("fabric", "inspect", str(path), home=tmp_path)
    assert result.code == 2 and why in one_line_error(result)
    missing = azbench_in_process("fabric", "inspect", str(tmp_path / "nope.txt"), home=tmp_path)
    assert missing.code == 2 and "does not exist" in one_line_error(missing)


def test_expected_figure_carries_its_source() -> None:
    gb200 = expected_for(lookup("gb200"))
    assert isinstance(gb200, Expected) and gb200.warn_gbps == 432.0 and "azurehpc-health-checks" in gb200.source
    assert expected_for(lookup("local")) is None
