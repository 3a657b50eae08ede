"""One reading of nccl-tests wherever it enters (issue 46, point 3), on real outputs from public
sources (tests/data/nccl_excerpts/, each cited in its ATTRIBUTION.md): the collective read from
the content (a line, then the table's bus factor, op and root; the file name last, and said
so), launcher prefixes, old and new headers, elided rank lines, plugin names with spaces, RCCL's
versions, GPU names mapped to catalog rows, ranks never 0, in- and out-of-place apart, and
`results import` judged as `fabric inspect` judges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.fabric.inspection import inspect_files, inspect_text
from orchestrator.fabric.nccl_log import parse_log
from orchestrator.fabric.nccltests import parse_runs, table_collective
from orchestrator.hardware.catalog import gpu_row
from tests.cli_helpers import azbench_in_process

DATA = Path(__file__).parent / "data" / "nccl_excerpts"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _srun_copy(tmp_path: Path, name: str) -> Path:
    """The output renamed as Slurm names job logs, every line behind `srun -l`'s label."""
    copy = tmp_path / "slurm-1234.out"
    copy.write_text("".join(f"{i % 4}: {line}" for i, line in enumerate(_read(name).splitlines(keepends=True))))
    return copy


@pytest.mark.parametrize("name, sku", [
    ("hpc-ai-envs-pr30_rccl_mi300x.txt", None),  # the table names it; the GPU names the row
    ("coreweave-nccl-tests-pr43_gb200_nvl72.txt", "gb200"),  # rank lines left out; --sku
    ("dgx-spark-playbooks-pr103_all_reduce_2node.txt", "h100"),  # one GPU per host: not comparable
])
def test_a_renamed_copy_under_srun_labels_is_all_reduce_and_judged_as_the_original(
        tmp_path: Path, name: str, sku: str | None) -> None:
    [original] = inspect_files([DATA / name], sku)
    [copy] = inspect_files([_srun_copy(tmp_path, name)], sku)
    assert [r.collective for r in original.runs] == [r.collective for r in copy.runs] == ["all_reduce"]
    assert "file name" not in copy.runs[0].collective_basis  # read from the content, not the name
    assert copy.verdict == original.verdict and copy.sku == original.sku
    assert [(c.check, c.status, c.evidence) for c in copy.checks] == \
        [(c.check, c.status, c.evidence) for c in original.checks]
    assert copy.runs[0].busbw == original.runs[0].busbw


def test_the_table_names_the_collective_when_no_line_does() -> None:
    # crickett-hpe/hpc-ai-envs#30: 8 ranks, 161.14/92.08 = 1.75 = 2(n-1)/n, op sum.
    [run] = parse_runs(_read("hpc-ai-envs-pr30_rccl_mi300x.txt"))
    assert run.collective == "all_reduce" and "2(n-1)/n for 8 ranks, op sum" in run.collective_basis
    assert run.version == "rccl-tests develop:83d38d9" and (run.ranks, run.hosts, run.gpus_per_host) == (8, 1, 8)
    # ROCm/rccl#1490 without its command line: (n-1)/n with op none, in-place checked: all_gather.
    lines = _read("rccl-1490_srun_label_all_gather.txt").splitlines()[2:]
    [bare] = parse_runs(lines)
    assert bare.collective == "all_gather" and "op none, in-place checked" in bare.collective_basis
    # Open MPI-tagged table of tiny sizes (bottlerocket-core-kit#141): too few digits, not guessed.
    [tagged] = parse_runs(_read("bottlerocket-core-kit-pr141_tag_output.txt"), name_hint="x.txt")
    assert tagged.collective is None and [s.size for s in tagged.sizes][:2] == [8, 16]
    # The bus-factor rules on their own: all_gather and alltoall look alike but for in-place checks.
    assert table_collective((10.0, 7 / 8), {"none"}, {"-1"}, 8, "out-of-place")[0] == "alltoall"
    assert table_collective((10.0, 7 / 8), {"none"}, {"-1"}, 8, "")[0] is None
    assert table_collective((10.0, 1.0), {"sum"}, {"-1"}, 2, "out-of-place")[0] == "sendrecv"
    assert table_collective((10.0, 1.0), {"sum"}, {"0"}, 2, "both")[0] is None  # a root: broadcast/reduce


def test_the_file_name_is_the_last_hint_and_says_so() -> None:
    # NVIDIA/nccl-tests#214: sendrecv whose table is too small to read a factor from.
    name = "nccl-tests-214_sendrecv_perf_2node.txt"
    [run] = parse_runs(_read(name), name_hint=name)
    assert run.collective == "sendrecv" and run.collective_basis.startswith(f"the file name '{name}' only")
    report = inspect_text("slurm-99.out", _read(name))
    assert report.runs[0].collective is None
    assert "an unnamed collective" in next(c.evidence for c in report.checks if c.check == "busbw")


def test_launcher_prefixes_and_the_command_line() -> None:
    # ROCm/rccl#1490: " 0: " on every table line, all_gather_perf on the srun command line.
    [run] = parse_runs(_read("rccl-1490_srun_label_all_gather.txt"))
    assert run.collective == "all_gather" and run.collective_basis == "its command line ('all_gather_perf')"
    assert [s.size for s in run.sizes] == [65536, 131072, 262144, 524288, 1048576]
    assert (run.sizes[0].busbw_oop, run.sizes[0].busbw_ip) == (0.59, 0.60)  # kept apart
    # nebius/soperator#428: all_reduce_perf_mpi under srun --mpi=pmix on 2 hosts.
    [mpi] = parse_runs(_read("soperator-pr428_srun_mpi_h100.txt"))
    assert mpi.collective == "all_reduce" and (mpi.ranks, mpi.hosts, mpi.host_names) == (12, 2, ["worker-1", "worker-0"])


def test_unknown_ranks_are_unknown_and_elided_ones_at_least() -> None:
    # bottlerocket-core-kit#141 (Open MPI tags) and ROCm/rocm-systems#3272: no rank lines.
    for name in ("bottlerocket-core-kit-pr141_tag_output.txt", "rocm-systems-pr3272_rccl_version.txt"):
        [run] = parse_runs(_read(name))
        assert run.ranks is None and run.hosts is None and run.ranks_text == "unknown" and run.sizes
    # coreweave/nccl-tests#43 keeps rank 71 only: at least 72 ranks; NVIDIA/nccl-tests#322: 50-64.
    [rack] = parse_runs(_read("coreweave-nccl-tests-pr43_gb200_nvl72.txt"))
    assert (rack.ranks, rack.ranks_at_least, rack.ranks_text) == (72, True, "at least 72")
    assert rack.collective == "all_reduce" and "(n = 72)" in rack.collective_basis and rack.gpus_per_host is None
    [elided] = parse_runs(_read("nccl-tests-322_elided_ranks.txt"))
    assert elided.ranks_text == "at least 65" and elided.host_names == ["HCA-6", "HCA-7", "HCA-8"]


def test_old_headers_and_lines_without_hash_marks() -> None:
    # LUMI's rccl-tests: "# nThread: 1 nGpus: 1 ...", rank lines without Group, "error" columns.
    [old] = parse_runs(_read("lumi-eap-rccl-tests_old_header.txt"))
    assert (old.min_bytes, old.max_bytes, old.ranks, old.hosts, old.gpu) == (8, 134217728, 2, 2, "Device 738c")
    assert old.collective == "all_reduce" and old.wrong == 0 and old.avg_busbw == 2.31741
    assert old.largest is not None and (old.largest.size, old.largest.busbw) == (134217728, 7.67)
    # NVIDIA/nccl-tests#249: pasted without any "#".
    [bare] = parse_runs(_read("nccl-tests-249_no_hash_marks.txt"))
    assert (bare.collective, bare.ranks, bare.gpu, bare.max_bytes) == ("all_reduce", 1, "NVIDIA A10G", 16777216)
    # NVIDIA/nccl#2441: step in bytes, two hosts of two GPUs.
    [nvl] = parse_runs(_read("nccl-2441_h100nvl_step_bytes.txt"))
    assert (nvl.version, nvl.ranks, nvl.hosts, nvl.gpus_per_host) == ("2.18.3", 4, 2, 2)


def test_plugin_names_with_spaces_ibext_and_rccl_versions() -> None:
    # NVIDIA/nccl#1597: "via NET/AWS Libfabric/1/GDRDMA" is GPUDirect RDMA over a plugin, not sockets.
    report = inspect_files([DATA / "nccl-1597_h200_aws_libfabric.txt"])[0]
    assert report.transport is not None and report.transport.gdr is True
    assert report.transport.channels == {"NET/AWS Libfabric/GDRDMA": 1}
    assert report.transport.nccl_version == "2.23.4+cuda12.4"
    assert next(c for c in report.checks if c.check == "transport").status == "ok"
    assert report.sku == "Standard_ND96isr_H200_v5" and "NVIDIA H200" in report.sku_basis
    # NVIDIA/nccl-tests#293: the HPC-X plugin IBext_v8.
    assert parse_log(_read("nccl-tests-293_2node_with_nccl_info.txt")).plugin == "IBext_v8"
    # ROCm/rocm-systems#3272: rccl-tests' own "RCCL version : ..." line.
    [run] = parse_runs(_read("rocm-systems-pr3272_rccl_version.txt"))
    assert run.rccl_version == "2.28.3-amdsmi-bdf-topology:360c5c6+"
    log = parse_log(["node:1:2 [0] NCCL INFO RCCL version 2.20.5+hip6.2 HEAD:2f83ac7",
                     "node:1:2 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v8)"])
    assert log.rccl_version == "2.20.5+hip6.2" and log.plugin == "AWS Libfabric"


@pytest.mark.parametrize("name, row", [
    ("NVIDIA H200", "Standard_ND96isr_H200_v5"),
    ("NVIDIA GB300", "Standard_ND128isr_GB300_v6"),
    ("AMD Instinct MI300X VF", "Standard_ND96isr_MI300X_v5"),
    ("AMD Instinct MI300X", "Standard_ND96isr_MI300X_v5"),
    ("NVIDIA H100 80GB HBM3", "Standard_ND96isr_H100_v5"),
    ("NVIDIA GB200", "Standard_ND128isr_NDR_GB200_v6"),
    ("NVIDIA H100 NVL", None),  # a PCIe part no catalog size has
    ("NVIDIA Graphics Device", None),  # an early GB200 driver's name: --sku says which
])
def test_gpu_names_real_outputs_print_map_to_their_rows(name: str, row: str | None) -> None:
    found = gpu_row(name)
    assert (found.name if found else None) == row


def test_results_import_gives_the_verdict_fabric_inspect_gives(tmp_path: Path) -> None:
    # The MI300X output warns against its GPU's row (161.14 < 314 GB/s); the GB200 rack, judged
    # with --sku gb200, passes; the same verdicts come back from the store in the report's JSON
    # and on the site's fabric table.
    cases = [("hpc-ai-envs-pr30_rccl_mi300x.txt", None, "warn"),
             ("coreweave-nccl-tests-pr43_gb200_nvl72.txt", "gb200", "ok")]
    for name, sku, verdict in cases:
        (tmp_path / name).mkdir()
        copy = _srun_copy(tmp_path / name, name)
        args = ["--sku", sku] if sku else []
        inspected = json.loads(azbench_in_process("fabric", "inspect", str(copy), *args, "-o", "json",
                                                  home=tmp_path).out)[0]
        imported = azbench_in_process("results", "import", str(copy), *args, home=tmp_path)
        assert imported.code == 0, imported.err
        assert f"verdict {verdict}, as `azbench fabric inspect` gives" in imported.out
        assert inspected["verdict"] == verdict
    report = json.loads(azbench_in_process("report", "-o", "json", home=tmp_path).out)
    assert [(f["collective"], f["verdict"]) for f in report["fabric"]] == [("all_reduce", "warn"), ("all_reduce", "ok")]
    mi300x, rack = report["fabric"]
    assert mi300x["sku"] == "Standard_ND96isr_MI300X_v5" and (mi300x["ranks"], mi300x["gpus_per_host"]) == (8, 8)
    assert (rack["ranks"], rack["ranks_at_least"]) == (72, True) and "2(n-1)/n" in rack["collective_basis"]
    busbw = next(c for c in mi300x["checks"] if c["check"] == "busbw")
    assert busbw["status"] == "warn" and "161.14 GB/s at 8M (out-of-place)" in busbw["evidence"]
    assert mi300x["busbw"][0]["busbw_ip"] == 154.63 and mi300x["busbw"][0]["busbw_oop"] == 161.14
    site = tmp_path / "site"
    built = azbench_in_process("report", "--html", str(site), home=tmp_path)
    assert built.code == 0, built.err
    page = (site / "fabric.html").read_text()
    assert "at least 72" in page and ">warn<" in page and ">ok<" in page
