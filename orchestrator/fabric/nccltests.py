"""nccl-tests outputs (NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, ...) read back.

What a run prints (nccl-tests src/util.cu, `doc/PERFORMANCE.md` for the columns): a header
("# nccl-tests version", "# Collective test starting: all_reduce_perf", "# nThread 1 nGpus 1
minBytes ..."), one "#  Rank  N Group  G Pid P on HOST device D [BUS] NAME" line per rank (older
versions: "#   Rank  N Pid P on HOST device D [0x1b] NAME"), the table header, one row per message
size (size, count, type, redop, root, then time, algbw, busbw and #wrong out of place and again
in place; older versions have no root column and "error" for "#wrong"), then "# Out of bounds
values : 0 OK" and "# Avg bus bandwidth : X". Launchers prefix lines ("0: " from a job step's --label,
"[1,0]<stdout>:" from Open MPI's --tag-output) and NCCL_DEBUG=INFO lines interleave: both are
read past. A file may hold several runs (one per collective); each starts at its "# nThread" line.

azbench's own CPU runner (templates/fabric_collectives.py) prints the same format, so one parser
reads both. Pure: text in, `NcclRun`s out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from pydantic import Field

from orchestrator.models import Frozen

# Bus bandwidth = algbw x this factor for n ranks (nccl-tests doc/PERFORMANCE.md, "Summary"):
# AllReduce 2(n-1)/n, ReduceScatter, AllGather and AlltoAll (n-1)/n; SendRecv moves each byte
# once (its busbw is its algbw, src/sendrecv.cu). templates/fabric_collectives.py applies the
# same table (tests/test_fabric.py holds the two together).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
BUS_FACTOR_NUMERATOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "alltoall": 1, "sendrecv": 0}

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s|\[\d+\]\s)")
_START = re.compile(r"#?\s*Collective test starting:\s*(\w+?)(?:_perf)?(?:_mpi)?\s*$")
_PERF_NAME = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|sendrecv|broadcast|reduce|"
                        r"gather|scatter|hypercube|alltoallv)_perf(?:_mpi)?\b")
_MARK = re.compile(r"AZBENCH_FABRIC_BEGIN collective=(\w+)")
_HEADER = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]*)\]\s*(.*?)\s*$")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_UNITS = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}


class SizeRow(Frozen):
    """One message size of a run: out-of-place and in-place time (us), algbw and busbw (GB/s),
    wrong elements (None where the run did not check: "N/A")."""

    size: int = Field(description="message size in bytes")
    count: int | None = None
    dtype: str | None = None
    time_us: float | None = None
    algbw: float | None = None
    busbw_oop: float | None = None
    wrong_oop: int | None = None
    time_us_ip: float | None = None
    algbw_ip: float | None = None
    busbw_ip: float | None = None
    wrong_ip: int | None = None

    @property
    def busbw(self) -> float | None:
        """The size's bus bandwidth: the better of out-of-place and in-place (one figure per size)."""
        values = [v for v in (self.busbw_oop, self.busbw_ip) if v is not None and math.isfinite(v)]
        return max(values) if values else None

    @property
    def wrong(self) -> int | None:
        """Wrong elements at this size, both columns together; None when neither was checked."""
        values = [v for v in (self.wrong_oop, self.wrong_ip) if v is not None]
        return sum(values) if values else None


class RankLine(Frozen):
    rank: int
    host: str
    device: int
    gpu: str = ""


class NcclRun(Frozen):
    """One collective's run as nccl-tests printed it."""

    collective: str | None = Field(None, description="all_reduce, all_gather, ...; None when the output does not name it")
    version: str | None = None
    ranks: int = 0
    hosts: int = 0
    gpus_per_host: int | None = None
    host_names: list[str] = Field(default_factory=list)
    gpu: str = ""
    sizes: list[SizeRow] = Field(default_factory=list)
    avg_busbw: float | None = Field(None, description="the '# Avg bus bandwidth' line: a mean over every size")
    out_of_bounds: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None

    @property
    def wrong(self) -> int | None:
        values = [s.wrong for s in self.sizes if s.wrong is not None]
        return sum(values) if values else None

    @property
    def peak(self) -> SizeRow | None:
        """The size with the highest busbw (ties: the larger size)."""
        rows = [s for s in self.sizes if s.busbw is not None]
        return max(rows, key=lambda s: (s.busbw or 0.0, s.size)) if rows else None

    @property
    def largest(self) -> SizeRow | None:
        rows = [s for s in self.sizes if s.busbw is not None]
        return max(rows, key=lambda s: s.size) if rows else None

    def at(self, nbytes: int) -> SizeRow | None:
        return next((s for s in self.sizes if s.size == nbytes and s.busbw is not None), None)


def parse_size(text: str) -> int:
    """nccl-tests' size argument: bytes, or K/M/G (binary: 16G = 16 x 2^30, as its -b/-e read it)."""
    text = text.strip().upper()
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def bus_factor(collective: str, ranks: int) -> float:
    """busbw / algbw for `collective` over `ranks` (PERFORMANCE.md; 1 for sendrecv)."""
    if ranks <= 1:
        return 0.0 if collective != "sendrecv" else 1.0
    numerator = BUS_FACTOR_NUMERATOR[collective]
    return 1.0 if numerator == 0 else numerator * (ranks - 1) / ranks


def strip_prefix(line: str) -> str:
    """A line without a launcher's label ("0: ", "[1,0]<stdout>:", "[0] ")."""
    return _PREFIX.sub("", line, count=1).rstrip("\n")


def last_avg_busbw(text: str) -> float | None:
    """The last "# Avg bus bandwidth" figure in `text`, a table or not (a gate round's fallback)."""
    found: float | None = None
    for line in text.splitlines():
        if (m := _AVG.search(strip_prefix(line))) is not None and (v := _float(m.group(1))) is not None:
            found = v
    return found


def looks_like_output(text: str) -> bool:
    """True when `text` holds an nccl-tests run (its "nThread ... nGpus" header)."""
    return any(_HEADER.search(strip_prefix(line)) for line in text.splitlines())


def parse_runs(text: str, name_hint: str | None = None) -> list[NcclRun]:
    """Every run in `text`, in order. A run's collective is the "Collective test starting" line,
    azbench's AZBENCH_FABRIC_BEGIN marker, or the last `<name>_perf` command seen before its header
    (pasted command lines); else `name_hint` (a file name), else None."""
    runs: list[_Builder] = []
    pending_name: str | None = None
    version: str | None = None
    current: _Builder | None = None
    for raw in text.splitlines():
        line = strip_prefix(raw)
        if " NCCL " in line and ("NCCL INFO" in line or "NCCL WARN" in line):
            continue  # NCCL_DEBUG lines between the header and the table
        if (m := _VERSION.search(line)) is not None:
            version = m.group(1)
            continue
        if (m := _START.search(line)) is not None or (m := _MARK.search(line)) is not None:
            pending_name = _collective(m.group(1))
            continue
        if (m := _HEADER.search(line)) is not None:
            current = _Builder(pending_name or _perf_name(name_hint), version,
                               int(m.group(3)), int(m.group(4)))
            runs.append(current)
            version = None  # the name stays: a second header of the same command keeps it
            continue
        if (m := _PERF_NAME.search(line)) is not None and not line.lstrip().startswith("#"):
            pending_name = _collective(m.group(1))
        if _is_table_header(line) and (current is None or current.rows):
            # A table without its "# nThread" header (a pasted excerpt, a second table): a run
            # of its own, with what the output says of it.
            current = _Builder(pending_name or _perf_name(name_hint), version, None, None)
            runs.append(current)
            version = None
        if current is None:
            continue
        current.feed(line)
    return [b.build() for b in runs]


def _is_table_header(line: str) -> bool:
    words = line.replace("#", " ").split()
    return "size" in words and "count" in words and "busbw" in words


def _perf_name(hint: str | None) -> str | None:
    if not hint:
        return None
    m = _PERF_NAME.search(hint) or re.search(r"(all_reduce|all_gather|reduce_scatter|alltoall|sendrecv)", hint)
    return _collective(m.group(1)) if m else None


def _collective(name: str) -> str:
    return name.lower().removesuffix("_perf").removesuffix("_mpi")


class _Builder:
    def __init__(self, collective: str | None, version: str | None, min_bytes: int | None,
                 max_bytes: int | None) -> None:
        self.collective, self.version = collective, version
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.ranks: dict[tuple[int, str], RankLine] = {}
        self.columns: list[str] = []
        self.rows: list[SizeRow] = []
        self.avg: float | None = None
        self.oob: int | None = None

    def feed(self, line: str) -> None:
        if (m := _RANK.search(line)) is not None:
            rank, host = int(m.group(1)), m.group(4)
            self.ranks.setdefault((rank, host), RankLine(rank=rank, host=host, device=int(m.group(5)),
                                                         gpu=m.group(7)))
            return
        if (m := _AVG.search(line)) is not None:
            self.avg = _float(m.group(1))
            return
        if (m := _OOB.search(line)) is not None:
            self.oob = int(m.group(1))
            return
        words = line.replace("#", " ").split()
        if _is_table_header(line):
            self.columns = words
            return
        if self.columns and words and words[0].isdigit() and not line.lstrip().startswith("#"):
            row = self._row(words)
            if row is not None:
                self.rows.append(row)

    def _row(self, words: Sequence[str]) -> SizeRow | None:
        cols = self.columns
        if len(words) < len(cols) - 2:  # a cut line
            return None
        # The table's own order: the first time/algbw/busbw/#wrong group is out of place, the
        # second in place; per-iteration columns (-I) have other names and are skipped.
        seen: dict[str, int] = {}
        values: dict[str, str] = {}
        for name, word in zip(cols, words):
            key = "wrong" if name in ("wrong", "#wrong", "error") else name
            index = seen.get(key, 0)
            seen[key] = index + 1
            values[f"{key}{'_ip' if index else ''}"] = word
        try:
            size = int(values["size"])
        except (KeyError, ValueError):
            return None
        return SizeRow(size=size, count=_int(values.get("count")), dtype=values.get("type"),
                       time_us=_float(values.get("time")), algbw=_float(values.get("algbw")),
                       busbw_oop=_float(values.get("busbw")), wrong_oop=_wrong(values.get("wrong")),
                       time_us_ip=_float(values.get("time_ip")), algbw_ip=_float(values.get("algbw_ip")),
                       busbw_ip=_float(values.get("busbw_ip")), wrong_ip=_wrong(values.get("wrong_ip")))

    def build(self) -> NcclRun:
        ranks = sorted(self.ranks.values(), key=lambda r: r.rank)
        hosts = list(dict.fromkeys(r.host for r in ranks))
        per_host = [sum(1 for r in ranks if r.host == h) for h in hosts]
        gpus = per_host[0] if per_host and len(set(per_host)) == 1 else (max(per_host) if per_host else None)
        # Ranks are the distinct rank numbers: processes that each think they are rank 0 (an
        # nccl-tests build without MPI under mpirun) are one rank on several hosts, not a job.
        return NcclRun(collective=self.collective, version=self.version, ranks=len({r.rank for r in ranks}),
                       hosts=len(hosts),
                       gpus_per_host=gpus, host_names=hosts, gpu=ranks[0].gpu if ranks else "",
                       sizes=self.rows, avg_busbw=self.avg, out_of_bounds=self.oob,
                       min_bytes=self.min_bytes, max_bytes=self.max_bytes)


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _wrong(text: str | None) -> int | None:
    """#wrong as printed: an integer, "0e+00" in old versions, "N/A" when not checked."""
    value = _float(text)
    return None if value is None else int(value)


def collectives_in(runs: Iterable[NcclRun]) -> list[str]:
    return sorted({r.collective for r in runs if r.collective})
