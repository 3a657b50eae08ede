"""Fabric verdicts, judged once here: what a collective's numbers and NCCL's own log say about
the network (`fabric inspect`, `results import`, `fabric test`, the report and the site all show
these), a gate round's nccl-tests busbw (runs/fleet.parse_nccl_round), and the gate's per-node
facts (GPU and HCA counts, IMEX and the NVLink fabric: judge_nodes, which fabric/gate.py calls).

The checks, each with its evidence:

- transport: a communicator whose inter-node channels run over NET/Socket fails (NCCL fell back
  to TCP sockets: read from the "via NET/..." channel lines, never guessed from the number of
  hosts); channels all over IB (or a plugin such as IBext) pass; a log without channel lines is
  "not checked".
- wrong values: any #wrong element fails (nccl-tests' correctness check, `-c`).
- busbw: below the SKU's warn level (hardware.catalog's NcclBaseline) warns. It is judged at
  the baseline's message size when the run reached it, else at the largest size measured, and
  only for the baseline's collective (all_reduce_perf); never from the "Avg bus bandwidth" line,
  which averages every size, small latency-bound ones included. A size without a baseline (the
  local CPU node, or a GPU the catalog does not know) is "not checked", and says so.

A failure is a failure whatever else passed; a warning alone is not a failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from orchestrator.hardware.catalog import GpuSku, NcclBaseline, gpu_row, lookup
from orchestrator.models import Frozen
from orchestrator.fabric.nccl_log import NcclTransport
from orchestrator.fabric.nccltests import NcclRun, SizeRow, last_avg_busbw, parse_runs, parse_size
from orchestrator.slurm.conf import natural_key

Status = Literal["ok", "warn", "fail", "not checked"]
_RANK = {"not checked": 0, "ok": 1, "warn": 2, "fail": 3}
BASELINE_COLLECTIVE = "all_reduce"  # NcclBaseline figures are all_reduce_perf busbw (catalog.py)


class Check(Frozen):
    """One verdict: which check, its status, and the evidence it rests on."""

    check: str
    status: Status
    evidence: str


class Expected(Frozen):
    """The SKU's published figure a busbw is set against: expected (or, without one, the warn
    level), the warn level, the message size, what it was measured over, and its source."""

    sku: str
    expected_gbps: float
    warn_gbps: float
    message: str
    size: int
    scope: str
    source: str
    gpus_per_vm: int = Field(0, description="GPUs per VM the figure was measured with (the row's)")
    nic_gbps: float | None = Field(None, description="one InfiniBand link's line rate, Gb/s (the row's facts)")


def worst(checks: Iterable[Check]) -> Status:
    """The verdict of several checks: fail > warn > ok > not checked."""
    return worst_of(c.status for c in checks)


def worst_of(statuses: Iterable[Status]) -> Status:
    found = list(statuses)
    return max(found, key=lambda s: _RANK[s]) if found else "not checked"


def expected_for(sku: GpuSku | None) -> Expected | None:
    """The SKU's all-reduce baseline, or None (no GPU, or nothing published)."""
    base: NcclBaseline | None = sku.nccl if sku is not None and sku.gpus_per_vm else None
    if sku is None or base is None:
        return None
    return Expected(sku=sku.name, expected_gbps=base.reference_gbps, warn_gbps=base.warn_gbps,
                    message=base.message, size=parse_size(base.message), scope=base.scope, source=base.source,
                    gpus_per_vm=sku.gpus_per_vm, nic_gbps=float(sku.ib_gbps_per_link) or None)


def judged_size(run: NcclRun, expected: Expected | None) -> SizeRow | None:
    """The size a run's busbw is judged at: the baseline's size when measured, else the largest."""
    if expected is not None and (row := run.at(expected.size)) is not None:
        return row
    return run.largest


def busbw_check(run: NcclRun, expected: Expected | None, *, device: str = "GPU") -> Check:
    """busbw at the judged size against the warn level (see the module docstring). A run with
    fewer GPUs per host than the row's (one GPU per node: one NIC) is "not comparable" with the
    node group's figure: the catalog publishes no per-NIC busbw, so it is set beside the NIC's
    line rate and not judged."""
    if device == "CPU":
        return Check(check="busbw", status="not checked",
                     evidence="CPU collectives (gloo): no published baseline to judge them against")
    basis = (f" (collective read from {run.collective_basis})" if run.collective and run.collective_basis
             else f" ({run.collective_basis})" if run.collective_basis else "")
    if run.collective != BASELINE_COLLECTIVE:
        return Check(check="busbw", status="not checked",
                     evidence=f"the catalog's baseline is all_reduce_perf busbw; this run is "
                              f"{run.collective or 'an unnamed collective'}{basis}")
    if expected is None:
        return Check(check="busbw", status="not checked",
                     evidence="no published all-reduce baseline for this size (see `azbench catalog`)")
    row = judged_size(run, expected)
    if row is None or row.busbw is None:
        return Check(check="busbw", status="not checked", evidence="the output has no measured size")
    where = (f"at {_bytes(row.size)} ({row.busbw_from})"
             + ("" if row.size == expected.size else f", the largest size measured (the baseline's is {expected.message})"))
    per_host = run.gpus_per_host
    if per_host is not None and expected.gpus_per_vm and per_host < expected.gpus_per_vm:
        nic = ""
        if per_host == 1 and expected.nic_gbps:
            line_rate = expected.nic_gbps / 8
            nic = (f"; one GPU per host runs over one NIC: {row.busbw / line_rate:.0%} of one "
                   f"{expected.nic_gbps:g} Gb/s link's {line_rate:g} GB/s line rate")
        return Check(check="busbw", status="not checked",
                     evidence=f"not comparable: {row.busbw:g} GB/s {where} with {per_host} GPU(s) per host, and "
                              f"{expected.sku}'s figure is for {expected.gpus_per_vm} per VM ({expected.scope}); "
                              f"the catalog publishes no per-NIC figure{nic}")
    status: Status = "warn" if row.busbw < expected.warn_gbps else "ok"
    relation = "below" if status == "warn" else "at or above"
    unknown = "" if per_host is not None else "; GPUs per host unknown (no rank lines): judged as a full VM"
    return Check(check="busbw", status=status,
                 evidence=f"{row.busbw:g} GB/s {where}, {relation} the warn level {expected.warn_gbps:g} GB/s "
                          f"of {expected.sku} ({expected.scope}; {expected.source}){basis}{unknown}")


def round_busbw(text: str, message: str) -> tuple[float | None, str]:
    """A gate round's busbw from one group's all_reduce_perf output (run at `message` only): the
    table's busbw at that size (else at the largest size measured), read by the one parser; the
    "# Avg bus bandwidth" line only when the output has no table (for a one-size run it is that
    size's busbw). (None, why) when the output holds neither."""
    runs = parse_runs(text)
    wanted = parse_size(message)
    for run in runs:
        row = run.at(wanted) or run.largest
        if row is not None and row.busbw is not None:
            return row.busbw, f"all_reduce_perf busbw at {_bytes(row.size)}, GB/s"
    if (avg := last_avg_busbw(text)) is not None:
        return avg, "all_reduce_perf avg bus bandwidth (no size table), GB/s"
    return None, "nccl-tests all_reduce_perf failed"


def wrong_check(run: NcclRun) -> Check:
    wrong = run.wrong
    if wrong is None:
        return Check(check="wrong values", status="not checked", evidence="#wrong not reported (run with -c 1)")
    if wrong:
        bad = [s for s in run.sizes if s.wrong]
        where = f" at {len(bad)} size(s) kept, first at {_bytes(min(s.size for s in bad))}" if bad else ""
        unkept = f" ({run.wrong_dropped} in the {run.rows_dropped} rows read but not kept)" if run.wrong_dropped else ""
        return Check(check="wrong values", status="fail", evidence=f"{wrong} wrong element(s){where}{unkept}")
    return Check(check="wrong values", status="ok", evidence=f"0 wrong elements over {len(run.sizes)} size(s)")


def transport_check(log: NcclTransport | None, *, device: str = "GPU") -> Check:
    """NET/Socket channels fail; every inter-node channel over IB (or a plugin) passes."""
    if device == "CPU":
        return Check(check="transport", status="not checked",
                     evidence="CPU collectives (gloo): no NCCL transport to read")
    if log is None or not log.info_lines:
        return Check(check="transport", status="not checked", evidence="no NCCL_DEBUG=INFO lines")
    if not log.channels:
        return Check(check="transport", status="not checked",
                     evidence=f"no inter-node channel lines among {log.info_lines} NCCL INFO lines "
                              "(one node, or the channels were not logged)")
    total = log.channel_count
    sockets = log.socket_channels
    if log.socket_count:
        example = f": e.g. {sockets[0].host}: '{sockets[0].line}'" if sockets else ""
        return Check(check="transport", status="fail",
                     evidence=f"{log.socket_count} of {total} inter-node channel ends via NET/Socket (TCP sockets, "
                              f"not InfiniBand){example}")
    kinds = ", ".join(f"{n} via {t}" for t, n in sorted(log.by_transport.items()))
    return Check(check="transport", status="ok", evidence=f"{total} inter-node channel ends: {kinds}")


def run_checks(run: NcclRun, log: NcclTransport | None, expected: Expected | None, *,
               device: str = "GPU") -> list[Check]:
    return [transport_check(log, device=device), wrong_check(run), busbw_check(run, expected, device=device)]


def sku_of(run_gpus: Sequence[str], sku: str | None) -> tuple[GpuSku | None, str]:
    """The catalog row to judge against: `sku` when given, else the one whose GPU the output
    names (gpu_row); with how it was chosen."""
    if sku:
        row = lookup(sku)
        return row, f"--sku {sku}"
    for name in run_gpus:
        found = gpu_row(name)
        if found is not None:
            return found, f"from the GPU the output names ('{name}'; --sku overrides)"
    named = next((n for n in run_gpus if n), "")
    return None, (f"no catalog size has the GPU '{named}'" if named else "the output names no GPU")


class RunReport(Frozen):
    """One nccl-tests run as `fabric inspect` and the report show it. Ranks and hosts the output
    does not state are None ("unknown"); `ranks_at_least` when rank lines were left out."""

    collective: str | None
    collective_basis: str = ""
    ranks: int | None
    ranks_at_least: bool = False
    hosts: int | None
    gpus_per_host: int | None
    gpu: str = ""
    nccl_tests_version: str | None = None
    rccl_version: str | None = None
    busbw: list[dict[str, float | int | None]] = Field(default_factory=list,
                                                        description="per size: size (bytes), busbw (the better of "
                                                        "the two), busbw_oop, busbw_ip, algbw, time_us, wrong")
    rows_dropped: int = Field(0, description="table rows read but not kept (over the parser's cap)")
    peak_busbw: float | None = None
    peak_size: int | None = None
    avg_busbw_line: float | None = Field(None, description="nccl-tests' '# Avg bus bandwidth' (a mean over every size: not judged)")
    wrong: int | None = None
    checks: list[Check] = Field(default_factory=list)
    verdict: Status = "not checked"


def run_report(run: NcclRun, checks: list[Check]) -> RunReport:
    peak = run.peak
    return RunReport(collective=run.collective, collective_basis=run.collective_basis, ranks=run.ranks,
                     ranks_at_least=run.ranks_at_least, hosts=run.hosts, gpus_per_host=run.gpus_per_host,
                     gpu=run.gpu, nccl_tests_version=run.version, rccl_version=run.rccl_version,
                     busbw=[size_point(s) for s in run.sizes], rows_dropped=run.rows_dropped,
                     peak_busbw=peak.busbw if peak else None, peak_size=peak.size if peak else None,
                     avg_busbw_line=run.avg_busbw, wrong=run.wrong, checks=checks, verdict=worst(checks))


def size_point(s: SizeRow) -> dict[str, float | int | None]:
    """One size as reports and the store keep it: out-of-place and in-place busbw and #wrong
    apart, and the better busbw (the one judged)."""
    return {"size": s.size, "busbw": s.busbw, "busbw_oop": s.busbw_oop, "busbw_ip": s.busbw_ip,
            "algbw": s.algbw if s.algbw is not None else s.algbw_ip,
            "time_us": s.time_us if s.time_us is not None else s.time_us_ip, "wrong": s.wrong,
            "wrong_oop": s.wrong_oop, "wrong_ip": s.wrong_ip}


# -- the gate's per-node checks (fabric/gate.py probes; templates/fabric_node_check.py reads) --------

COMPLETED, SUCCESS = "Completed", "Success"
Facts = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    node: str
    check: str
    evidence: str
    value: float | None = None
    threshold: float | None = None


def multi_node_nvlink(sku: GpuSku) -> bool:
    """GB200-like sizes: an NVLink domain (IMEX, the fabric manager) spans several VMs."""
    return sku.nvlink_domain_vms > 1


def node_findings(node: str, facts: Facts | None, sku: GpuSku) -> list[Finding]:
    """The per-node checks on one node's facts."""
    if facts is None:
        return [Finding(node, "fabric_check", "printed no AZBENCH_FABRIC line (node hung, or python3 missing)")]
    out: list[Finding] = []
    gpus = facts.get("gpus") or {}
    count = int(gpus.get("count") or 0)
    if count < sku.gpus_per_vm:
        out.append(Finding(node, "gpu_count", f"nvidia-smi lists {count} of {sku.gpus_per_vm} GPUs"
                           + (f": {gpus['error']}" if gpus.get("error") else ""), count, sku.gpus_per_vm))
    hcas = facts.get("hcas") or []
    if len(hcas) < sku.ib_links:
        names = ", ".join(str(h.get("name")) for h in hcas) or "none"
        out.append(Finding(node, "ib_hcas", f"{facts.get('hca_source', 'ibstat')} lists {len(hcas)} of {sku.ib_links} "
                           f"InfiniBand HCAs ({names})", len(hcas), sku.ib_links))
    down = [str(h.get("name")) for h in hcas if not h.get("active")]
    if down:
        out.append(Finding(node, "ib_port_state", f"InfiniBand HCA(s) with no Active port: {', '.join(down)}",
                           len(hcas) - len(down), len(hcas)))
    if not multi_node_nvlink(sku):
        return out
    imex = facts.get("imex") or {}
    if imex.get("service") != "active":
        out.append(Finding(node, "imex_service", f"systemctl is-active nvidia-imex: {imex.get('service') or 'no answer'}"))
    if not imex.get("channel"):
        out.append(Finding(node, "imex_channel", "/dev/nvidia-caps-imex-channels/channel0 does not exist "
                           "(IMEX channels are created by the administrator; none survives a reboot)"))
    if imex.get("table") is None:
        out.append(Finding(node, "imex_domain", f"nvidia-imex-ctl -N failed on this node: "
                           f"{imex.get('table_error') or 'no output'}"))
    fabric = imex.get("fabric") or []
    bad = [f"GPU {i}: State {g.get('state', '?')}, Status {g.get('status', '?')}" for i, g in enumerate(fabric)
           if g.get("state") != COMPLETED or g.get("status") != SUCCESS]
    if not fabric:
        out.append(Finding(node, "fabric_state", "nvidia-smi -q shows no GPU Fabric section"
                           + (f": {imex['fabric_error']}" if imex.get("fabric_error") else "")))
    elif bad:
        out.append(Finding(node, "fabric_state", "nvidia-smi -q: " + "; ".join(bad) + f" (want {COMPLETED}/{SUCCESS})"))
    return out


def domain_findings(facts: Mapping[str, Facts], sku: GpuSku) -> list[Finding]:
    """IMEX peers that other nodes' tables show not READY, or (in a domain of three or more)
    with every connection to them down: the peer is flagged, with the observer and what it saw;
    the node that saw it is not."""
    if not multi_node_nvlink(sku):
        return []
    by_address = {a: node for node, f in facts.items() for a in f.get("addresses") or []}
    seen: dict[str, list[str]] = {}
    for observer in sorted(facts, key=natural_key):
        table = (facts[observer].get("imex") or {}).get("table")
        if not table:
            continue
        members = {n["index"]: n["address"] for n in table.get("nodes", [])}
        for n in table.get("nodes", []):
            if n.get("status") != "READY":
                seen.setdefault(n["address"], []).append(f"{observer} lists it {n.get('status')}")
        if len(members) < 3:
            continue  # two nodes cut apart: either end could be the one down
        for k, address in members.items():
            into = sorted({cell for frm, to, cell in table.get("not_connected", []) if to == k and frm != k})
            count = sum(1 for frm, to, _ in table.get("not_connected", []) if to == k and frm != k)
            if count == len(members) - 1:
                seen.setdefault(address, []).append(f"{observer}: every connection to it is {'/'.join(into)}")
    out = []
    for address, why in seen.items():
        node = by_address.get(address)
        if node is None:
            continue  # a domain member this gate did not check: the gate names only its nodes
        out.append(Finding(node, "imex_domain", f"nvidia-imex-ctl -N: {address} ({node}) not READY or not "
                           f"connected: {'; '.join(why[:3])}" + (f" (+{len(why) - 3} more)" if len(why) > 3 else "")))
    return out


def rack_findings(facts: Mapping[str, Facts], racks: Mapping[str, Sequence[str]], sku: GpuSku) -> list[Finding]:
    """Within each rack, every node's GPUs must report one ClusterUUID.CliqueId, the rack's."""
    if not multi_node_nvlink(sku):
        return []
    out = []
    for rack, members in racks.items():
        domains = {n: _domain(facts[n]) for n in members if n in facts}
        known = {n: d for n, d in domains.items() if d}
        if not known:
            continue
        (common, count), = Counter(known.values()).most_common(1)
        for node, d in sorted(domains.items(), key=lambda kv: natural_key(kv[0])):
            if d and d != common:
                out.append(Finding(node, "nvlink_domain", f"ClusterUUID.CliqueId {d} differs from rack {rack}'s "
                                   f"{common} (on {count} of its {len(domains)} nodes)"))
            elif d is None and (facts[node].get("imex") or {}).get("fabric"):
                out.append(Finding(node, "nvlink_domain", "its GPUs report more than one ClusterUUID.CliqueId"))
    return out


def judge_nodes(facts: Mapping[str, Facts], nodes: Sequence[str], sku: GpuSku,
          racks: Mapping[str, Sequence[str]]) -> list[Finding]:
    """Every finding on `nodes`, one per node and check (evidence from several views joined)."""
    found = [f for n in nodes for f in node_findings(n, facts.get(n), sku)]
    found += [f for f in domain_findings(facts, sku) + rack_findings(facts, racks, sku) if f.node in set(nodes)]
    merged: dict[tuple[str, str], Finding] = {}
    for f in found:
        key = (f.node, f.check)
        merged[key] = f if key not in merged else Finding(f.node, f.check, f"{merged[key].evidence} | {f.evidence}",
                                                          merged[key].value, merged[key].threshold)
    return list(merged.values())


def _domain(facts: Facts) -> str | None:
    fabric = (facts.get("imex") or {}).get("fabric") or []
    found = {f"{g.get('uuid')}.{g.get('clique')}" for g in fabric
             if g.get("uuid") not in (None, "", "N/A") and g.get("clique") not in (None, "", "N/A")}
    return found.pop() if len(found) == 1 else None


def _bytes(n: int) -> str:
    for unit, size in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n} B"


def human_size(n: int) -> str:
    """A byte count as nccl-tests' arguments write it (16G, 512K, 8 B)."""
    return _bytes(n)
