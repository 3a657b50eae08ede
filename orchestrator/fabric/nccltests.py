"""nccl-tests outputs (NVIDIA/nccl-tests, ROCm/rccl-tests: all_reduce_perf, all_gather_perf, ...)
read back: the one parser, wherever an output enters (`fabric inspect`, `results import`, `fabric
test` and the gate's rounds).

What a run prints (nccl-tests src/util.cu, `doc/PERFORMANCE.md` for the columns): a header
("# nccl-tests version", "# Collective test starting: all_reduce_perf", "# nThread 1 nGpus 1
minBytes ..."; old rccl-tests print "# nThread: 1 nGpus: 1 minBytes: ..."), one "#  Rank  N Group
G Pid P on HOST device D [BUS] NAME" line per rank (older: "#   Rank  N Pid P on HOST device D
[0x1b] NAME", oldest: "# Rank N on HOST device D ..."), the table header, one row per message size
(size, count, type, redop, root, then time, algbw, busbw and #wrong out of place and again in place;
older versions have no root column and "error" for "#wrong"), then "# Out of bounds values : 0 OK"
and "# Avg bus bandwidth : X". rccl-tests add "rccl-tests: Version ..." and "RCCL version : ...".
Launchers prefix lines ("0: " from a Slurm job step's --label, "[1,0]<stdout>:" from Open MPI's --tag-output, "[0] ")
and NCCL_DEBUG=INFO lines interleave: both are read past. A file may hold several runs (one per
collective); each starts at its "nThread" header (or at a table without one).

Which collective a run is comes from its content, in this order: the "Collective test starting"
line (or azbench's AZBENCH_FABRIC_BEGIN marker), the `<name>_perf` command line before it, then the
table itself (busbw/algbw is 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
alltoall, 1 for sendrecv, broadcast and reduce; the op column says sum or none and the root column
-1 or a rank); the file name only as a last hint, and `collective_basis` says which.

Bounded (issue 48): lines are fed one at a time (`Parser.feed`), every pattern is anchored at the
line's start, a run keeps at most MAX_ROWS table rows (plus the rows a verdict may need: the
largest size, the best busbw, and every power-of-two size), and a number longer than MAX_DIGITS
characters is refused (ConfigError naming the line). Pure: lines in, `NcclRun`s out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from pydantic import Field

from orchestrator.errors import ConfigError
from orchestrator.models import Frozen

# Bus bandwidth = algbw x this factor for n ranks (nccl-tests doc/PERFORMANCE.md, "Summary"):
# AllReduce 2(n-1)/n, ReduceScatter, AllGather and AlltoAll (n-1)/n; SendRecv moves each byte
# once (its busbw is its algbw, src/sendrecv.cu). templates/fabric_collectives.py applies the
# same table (tests/test_fabric.py holds the two together).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
BUS_FACTOR_NUMERATOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "alltoall": 1, "sendrecv": 0}
MAX_DIGITS = 24  # a number's characters: 2^64 has 20 digits; nccl-tests prints none longer
MAX_RANK_LINES = 1 << 17  # rank lines kept per run (16,384 VMs of 8 GPUs); the highest rank still counted
MAX_ROWS = 4096  # table rows kept per run (an -i sweep of 4 KiB steps to 16 MiB); the rest counted
_KNOWN = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "sendrecv", "broadcast",
          "reduce", "gather", "scatter", "hypercube")

# Every pattern is matched at the start of a line (re.match), with no lazy group before a tail.
_PREFIX = re.compile(r"\s*(?:\[\d{1,9},\d{1,9}\]<std(?:out|err)>:|\d{1,9}:\s|\[\d{1,9}\]\s)")
_START = re.compile(r"#?\s*Collective test starting:\s*(\w+)")
_MARK = re.compile(r"AZBENCH_FABRIC_BEGIN collective=(\w+)")
_HEADER = re.compile(r"#?\s*nThread:?\s+(\d+)\s+nGpus:?\s+(\d+)\s+minBytes:?\s+(\d+)\s+maxBytes:?\s+(\d+)")
_RANK = re.compile(r"#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"(?:\[([^\]]*)\]\s*)?(.*)")
_ELIDED = re.compile(r"#?\s*(?:\.\.\.|…|\[\.\.\.\]|<\.\.\.>)")
_AVG = re.compile(r"#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"#?\s*Out of bounds values\s*:\s*(\d+)")
_VERSION = re.compile(r"#\s*nccl-tests version\s+(\S+)")
_RCCL_TESTS = re.compile(r"#?\s*rccl-tests:\s*Version\s+(\S+)")
_RCCL_VERSION = re.compile(r"#?\s*RCCL version\s*:?\s*(\S+)")
_NCCL_VERSION = re.compile(r"#?\s*(?:NCCL version|Using NCCL)\s+(\S+)")
_UNITS = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}


def _perf_word(line: str) -> str | None:
    """The collective of the first `<name>_perf` word of a command line, else None."""
    at = line.find("_perf")
    while at > 0:
        start = at
        while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
            start -= 1
        name = line[start:at].lower()
        if name in _KNOWN:
            return name
        at = line.find("_perf", at + 5)
    return None


class SizeRow(Frozen):
    """One message size of a run: out-of-place and in-place time (us), algbw and busbw (GB/s),
    wrong elements (None where the run did not check: "N/A"), each kept apart."""

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
    def busbw_from(self) -> str:
        """Which column `busbw` is: "out-of-place" or "in-place"."""
        if self.busbw_ip is not None and (self.busbw_oop is None or self.busbw_ip > self.busbw_oop):
            return "in-place"
        return "out-of-place"

    @property
    def wrong(self) -> int | None:
        """Wrong elements at this size, both columns together; None when neither was checked."""
        values = [v for v in (self.wrong_oop, self.wrong_ip) if v is not None]
        return sum(values) if values else None


class NcclRun(Frozen):
    """One collective's run as nccl-tests printed it. Ranks and hosts the output does not state
    are None ("unknown"), never 0; `ranks_at_least` when rank lines were left out."""

    collective: str | None = Field(None, description="all_reduce, all_gather, ...; None when the output does not say")
    collective_basis: str = Field("", description="how the collective was read: which line, the table, or the file name")
    version: str | None = None
    rccl_version: str | None = None
    ranks: int | None = None
    ranks_at_least: bool = False
    hosts: int | None = None
    gpus_per_host: int | None = None
    host_names: list[str] = Field(default_factory=list)
    gpu: str = ""
    sizes: list[SizeRow] = Field(default_factory=list)
    avg_busbw: float | None = Field(None, description="the '# Avg bus bandwidth' line: a mean over every size")
    out_of_bounds: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    rows_read: int = 0
    rows_dropped: int = Field(0, description="table rows read but not kept (over MAX_ROWS): counted in `wrong`")
    wrong_dropped: int = 0

    @property
    def wrong(self) -> int | None:
        values = [s.wrong for s in self.sizes if s.wrong is not None]
        return sum(values) + self.wrong_dropped if values else (self.wrong_dropped or None)

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

    @property
    def ranks_text(self) -> str:
        """"16", "at least 72", or "unknown"."""
        if self.ranks is None:
            return "unknown"
        return f"at least {self.ranks}" if self.ranks_at_least else str(self.ranks)


def parse_size(text: str) -> int:
    """nccl-tests' size argument: bytes, or K/M/G (binary: 16G = 16 x 2^30, as its -b/-e read it)."""
    text = text.strip().upper()
    if len(text) > MAX_DIGITS:
        raise ConfigError(f"size '{text[:16]}...': over {MAX_DIGITS} characters")
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
    """A line without a launcher's label ("0: ", "[1,0]<stdout>:", "[0] ") and its line end."""
    m = _PREFIX.match(line)
    return (line[m.end():] if m else line).rstrip("\r\n")


def last_avg_busbw(text: str) -> float | None:
    """The last "# Avg bus bandwidth" figure in `text`, a table or not (a gate round's fallback)."""
    found: float | None = None
    for line in text.splitlines():
        if (m := _AVG.match(strip_prefix(line))) is not None and (v := _float(m.group(1))) is not None:
            found = v
    return found


def looks_like_output(text: str) -> bool:
    """True when `text` holds an nccl-tests run (its "nThread ... nGpus" header or a size table)."""
    return any(_HEADER.match(s) or _is_table_header(s) for s in map(strip_prefix, text.splitlines()))


def parse_runs(text: str | Iterable[str], name_hint: str | None = None) -> list[NcclRun]:
    """Every run in `text` (a whole output or its lines), in order (see the module docstring)."""
    parser = Parser(name_hint)
    for number, line in enumerate(text.splitlines() if isinstance(text, str) else text, 1):
        parser.feed(line, number)
    return parser.runs()


class Parser:
    """nccl-tests runs, one line at a time: `feed` each line, then `runs()`."""

    def __init__(self, name_hint: str | None = None) -> None:
        self.name_hint = name_hint
        self.builders: list[_Builder] = []
        self.pending: tuple[str, str] | None = None  # (collective, basis) for the next run
        self.version: str | None = None
        self.rccl_version: str | None = None
        self.current: _Builder | None = None

    def feed(self, raw: str, number: int = 0) -> None:
        line = strip_prefix(raw)
        if not line.strip():
            return
        head = line.lstrip()[:1]
        if head.isdigit() and self.current is not None and self.current.columns:
            if " NCCL INFO " not in line and " NCCL WARN " not in line:
                self.current.row(line, number)
            return
        if " NCCL INFO " in line or " NCCL WARN " in line:
            return  # NCCL_DEBUG lines between the header and the table
        if (m := _VERSION.match(line)) is not None:
            self.version = m.group(1)
        elif (m := _RCCL_TESTS.match(line)) is not None:
            if self.current is not None and not self.current.rows_read:
                self.current.version = self.current.version or f"rccl-tests {m.group(1)}"
            else:
                self.version = self.version or f"rccl-tests {m.group(1)}"
        elif (m := _RCCL_VERSION.match(line)) is not None:
            self.rccl_version = m.group(1)
            if self.current is not None:
                self.current.rccl_version = m.group(1)
        elif (m := _START.match(line)) is not None or (m := _MARK.match(line)) is not None:
            name = _collective(m.group(1))
            self.pending = (name, "its 'Collective test starting' line" if "starting" in line
                            else "azbench's AZBENCH_FABRIC_BEGIN marker")
        elif (m := _HEADER.match(line)) is not None:
            self.current = self._start(_int(m.group(3), number), _int(m.group(4), number))
        elif _is_table_header(line):
            if self.current is None or self.current.rows_read:
                # A table without its "nThread" header (a pasted excerpt, a second table): a run
                # of its own, with what the output says of it.
                self.current = self._start(None, None)
            self.current.set_columns(line.replace("#", " ").split())
        elif self.current is not None and not (self.current.rows_read and _RANK.match(line)):
            self.current.feed(line, number)
        elif _RANK.match(line):
            # rank lines with no header before them (an excerpt that starts there): a run of its own
            self.current = self._start(None, None)
            self.current.feed(line, number)
        if head != "#" and (perf := _perf_word(line)) is not None and not line.lstrip().startswith("#"):
            # a pasted command line names the next run (or this one, printed before its table)
            if self.current is not None and not self.current.rows_read and self.current.basis == "":
                self.current.collective, self.current.basis = perf, f"its command line ('{perf}_perf')"
            else:
                self.pending = (perf, f"its command line ('{perf}_perf')")

    def _start(self, min_bytes: int | None, max_bytes: int | None) -> _Builder:
        name, basis = self.pending if self.pending is not None else (None, "")
        built = _Builder(name, basis, self.version, self.rccl_version, min_bytes, max_bytes)
        self.builders.append(built)
        self.version = None  # the name stays: a second header of the same command keeps it
        return built

    def runs(self) -> list[NcclRun]:
        return [b.build(self.name_hint) for b in self.builders]


def _is_table_header(line: str) -> bool:
    if "busbw" not in line:
        return False
    words = line.replace("#", " ").split()
    return "busbw" in words and ("size" in words or "bytes" in words) and ("count" in words or "N" in words)


def _collective(name: str) -> str:
    name = name.lower()
    for suffix in ("_mpi", "_perf"):
        name = name.removesuffix(suffix)
    return name


# A table row as the parser holds it: size, count, type, then out-of-place time, algbw, busbw,
# #wrong and in-place time, algbw, busbw, #wrong.
_Row = tuple[int, "int | None", "str | None", "float | None", "float | None", "float | None", "int | None",
             "float | None", "float | None", "float | None", "int | None"]
_ALIASES = {"wrong": "wrong", "#wrong": "wrong", "error": "wrong", "res": "wrong", "bytes": "size", "N": "count",
            "op": "redop"}


def _best(row: _Row) -> float:
    return max((v for v in (row[5], row[9]) if v is not None), default=0.0)


def _size_row(r: _Row) -> SizeRow:
    return SizeRow(size=r[0], count=r[1], dtype=r[2], time_us=r[3], algbw=r[4], busbw_oop=r[5], wrong_oop=r[6],
                   time_us_ip=r[7], algbw_ip=r[8], busbw_ip=r[9], wrong_ip=r[10])


class _Builder:
    def __init__(self, collective: str | None, basis: str, version: str | None, rccl_version: str | None,
                 min_bytes: int | None, max_bytes: int | None) -> None:
        self.collective, self.basis = collective, basis
        self.version, self.rccl_version = version, rccl_version
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.pairs: set[tuple[int, str]] = set()  # (rank, host) of each rank line, up to MAX_RANK_LINES
        self.ranks: set[int] = set()
        self.max_rank: int | None = None
        self.hosts: dict[str, int] = {}  # host -> its distinct rank lines
        self.gpu = ""
        self.elided = False
        self.columns: list[str] = []
        self.kept: list[_Row] = []
        self.extra: dict[str, _Row] = {}  # over MAX_ROWS: the largest size and the best busbw
        self.rows_read = 0
        self.dropped = 0
        self.wrong_dropped = 0
        self.avg: float | None = None
        self.oob: int | None = None
        self.ratio: tuple[float, float] | None = None  # (algbw, busbw/algbw) of the best-resolved row
        self.redops: dict[str, None] = {}
        self.roots: dict[str, None] = {}
        self.both_checked = self.oop_only = False

    def feed(self, line: str, number: int) -> None:
        if (m := _RANK.match(line)) is not None:
            rank, host = _int(m.group(1), number), m.group(2)
            if rank is not None:
                self.max_rank = rank if self.max_rank is None else max(self.max_rank, rank)
                if (rank, host) not in self.pairs and len(self.pairs) < MAX_RANK_LINES:
                    self.pairs.add((rank, host))
                    self.ranks.add(rank)
                    self.hosts[host] = self.hosts.get(host, 0) + 1
            self.gpu = self.gpu or m.group(5).strip()
            return
        if self.ranks and not self.columns and _ELIDED.match(line):
            self.elided = True
            return
        if (m := _AVG.match(line)) is not None:
            self.avg = _float(m.group(1))
            return
        if (m := _OOB.match(line)) is not None:
            self.oob = _int(m.group(1), number)

    def set_columns(self, words: list[str]) -> None:
        """The table's header: each column's key, in the table's own order (the first time/algbw/
        busbw/#wrong group is out of place, the second in place; per-iteration columns of -I have
        other names and are skipped)."""
        seen: dict[str, int] = {}
        keys = []
        for name in words:
            key = _ALIASES.get(name, name)
            index = seen.get(key, 0)
            seen[key] = index + 1
            keys.append(f"{key}{'_ip' if index else ''}")
        self.columns = keys

    def row(self, line: str, number: int) -> None:
        """One table row: counted, and kept while under MAX_ROWS (or where a verdict may need it).
        Rows are held as tuples; SizeRow models are built once, for the rows kept."""
        words = line.split()
        if len(words) < len(self.columns) - 2:  # a cut line
            return
        if max(map(len, words), default=0) > MAX_DIGITS:
            for word in words:
                if len(word) > MAX_DIGITS and (word[0].isdigit() or word[0] in "+-."):
                    raise ConfigError(f"line {number}: a number of {len(word)} characters (at most {MAX_DIGITS}): "
                                      "not an nccl-tests value")
        values = dict(zip(self.columns, words))
        size = _int(values.get("size"), number)
        if size is None:
            return
        self.rows_read += 1
        get = values.get
        alg, bus, alg_ip, bus_ip = _float(get("algbw")), _float(get("busbw")), _float(get("algbw_ip")), \
            _float(get("busbw_ip"))
        wrong, wrong_ip = _wrong(get("wrong")), _wrong(get("wrong_ip"))
        if len(self.redops) < 8 and (op := get("redop")) is not None:
            self.redops.setdefault(op.lower())
        if len(self.roots) < 8 and (root := get("root")) is not None:
            self.roots.setdefault(root)
        for a, b in ((alg, bus), (alg_ip, bus_ip)):
            if a and b and a > 0 and (self.ratio is None or a > self.ratio[0]):
                self.ratio = (a, b / a)
        if wrong is not None:
            self.both_checked = self.both_checked or wrong_ip is not None
            self.oop_only = self.oop_only or wrong_ip is None
        row: _Row = (size, _int(get("count"), number), get("type"), _float(get("time")), alg, bus, wrong,
                     _float(get("time_ip")), alg_ip, bus_ip, wrong_ip)
        if len(self.kept) < MAX_ROWS or (size & (size - 1) == 0 and len(self.kept) < MAX_ROWS + 64):
            self.kept.append(row)
            return
        # Over the cap: counted, and kept only where a verdict may need it.
        self.dropped += 1
        self.wrong_dropped += (wrong or 0) + (wrong_ip or 0)
        if (wrong or wrong_ip) and "wrong" not in self.extra:
            self.extra["wrong"] = row  # the first wrong size: the verdict's evidence names it
        best_bus = max((v for v in (bus, bus_ip) if v is not None), default=None)
        if best_bus is not None:
            peak = self.extra.get("peak")
            if peak is None or (best_bus, size) > (_best(peak), peak[0]):
                self.extra["peak"] = row
            big = self.extra.get("largest")
            if big is None or size > big[0]:
                self.extra["largest"] = row

    def build(self, name_hint: str | None) -> NcclRun:
        hosts = list(self.hosts)
        per_host = list(self.hosts.values())
        gpus = per_host[0] if per_host and len(set(per_host)) == 1 else (max(per_host) if per_host else None)
        # Ranks are numbered from 0: the highest seen + 1 is how many there are at least; fewer
        # distinct lines than that, or an elision mark among them, means some were left out.
        # Processes that each think they are rank 0 (nccl-tests without MPI under mpirun) are one
        # rank on several hosts, not a job.
        ranks = self.max_rank + 1 if self.max_rank is not None else None
        at_least = ranks is not None and (self.elided or len(self.ranks) < ranks)
        extra = list({id(r): r for r in self.extra.values()}.values())
        sizes = [_size_row(r) for r in self.kept + extra]
        # The extra rows were counted as dropped; kept after all, they count in `sizes` only.
        dropped = self.dropped - len(extra)
        wrong_dropped = self.wrong_dropped - sum((r[6] or 0) + (r[10] or 0) for r in extra)
        collective, basis = self.collective, self.basis
        if collective is None:
            collective, basis = self._from_table(ranks if not at_least else None, name_hint)
        return NcclRun(collective=collective, collective_basis=basis, version=self.version,
                       rccl_version=self.rccl_version, ranks=ranks, ranks_at_least=at_least,
                       hosts=len(hosts) if hosts else None, gpus_per_host=None if at_least else gpus,
                       host_names=hosts[:64], gpu=self.gpu, sizes=sizes, avg_busbw=self.avg,
                       out_of_bounds=self.oob, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                       rows_read=self.rows_read, rows_dropped=dropped, wrong_dropped=wrong_dropped)

    def _from_table(self, ranks: int | None, name_hint: str | None) -> tuple[str | None, str]:
        """The collective the table says (bus factor, op, root), else the file name's, else None."""
        checked = "both" if self.both_checked else ("out-of-place" if self.oop_only else "")
        found, why = table_collective(self.ratio, set(self.redops), set(self.roots), ranks, checked)
        hinted = _hint(name_hint)
        if found is not None:
            return found, why
        if hinted is not None and (not why or hinted in why):
            return hinted, (f"the file name '{name_hint}' only (the output does not say"
                            + (f"; the table says {why})" if why else ")"))
        return None, why or "the output does not say which collective"


def table_collective(ratio: tuple[float, float] | None, redops: set[str], roots: set[str],
                     ranks: int | None, checked: str = "") -> tuple[str | None, str]:
    """The collective a table's numbers say: busbw/algbw against 2(n-1)/n (all_reduce), (n-1)/n
    (all_gather, reduce_scatter, alltoall) and 1 (sendrecv), with the op column (sum or none), the
    root column (-1: no root) and which #wrong columns were checked ("both", or "out-of-place"
    only: nccl-tests checks no in-place sendrecv or alltoall). (None, what it narrowed it to) when
    the table cannot tell."""
    if ratio is None or ratio[0] < 0.5:
        return None, ""  # too few digits in algbw to read a factor from
    alg, r = ratio
    tol = 0.01 / alg + 0.01  # both columns are printed to 2 decimals
    op = next(iter(redops)) if len(redops) == 1 else None
    if roots and roots != {"-1"}:
        return None, "a rooted collective (broadcast or reduce: the root column)"
    said = f"busbw/algbw {r:.3f}"

    def near(want: float) -> bool:
        return abs(r - want) <= tol * max(want, 1.0)

    n = ranks if ranks is not None and ranks >= 2 else None
    if op == "sum":
        if n is not None and n > 2 and near(2 * (n - 1) / n) or n is None and r > 1.0 + tol:
            ranks_read = f" for {n} ranks" if n else (f" (n = {2 / (2 - r):.0f})" if r < 2 else "")
            return "all_reduce", f"the table: {said} = 2(n-1)/n{ranks_read}, op sum"
        if n is not None and n > 2 and near((n - 1) / n) or n is None and r < 1.0 - tol:
            return "reduce_scatter", f"the table: {said} = (n-1)/n" + (f" for {n} ranks" if n else "") + ", op sum"
        if n == 2 and near(1.0):
            if checked == "both":
                return "all_reduce", f"the table: {said} = 2(n-1)/n for 2 ranks, op sum, in-place checked"
            if checked == "out-of-place":
                return "sendrecv", f"the table: {said} = 1 for 2 ranks, op sum, in-place not checked"
            return None, f"all_reduce or sendrecv ({said} for 2 ranks, op sum)"
    if op == "none" and (n is not None and n > 2 and near((n - 1) / n) or n is None and r < 1.0 - tol):
        if checked == "both":
            return "all_gather", f"the table: {said} = (n-1)/n, op none, in-place checked"
        if checked == "out-of-place":
            return "alltoall", f"the table: {said} = (n-1)/n, op none, in-place not checked"
        return None, f"all_gather or alltoall ({said} = (n-1)/n, op none)"
    ranks_said = f"{n} ranks" if n else "ranks unknown"
    return None, f"the table: {said}, op {op or 'not one'}, {ranks_said}: no single collective's factor"


def _hint(hint: str | None) -> str | None:
    if not hint:
        return None
    if (name := _perf_word(hint)) is not None:
        return name
    lower = hint.lower()
    return next((c for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv") if c in lower), None)


def _float(text: str | None) -> float | None:
    if text is None or len(text) > MAX_DIGITS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str | None, number: int = 0) -> int | None:
    if text is None or not text.isdigit():
        return None
    if len(text) > MAX_DIGITS:
        raise ConfigError(f"line {number}: a number of {len(text)} digits (at most {MAX_DIGITS}): "
                          "not an nccl-tests value")
    return int(text)


def _wrong(text: str | None) -> int | None:
    """#wrong as printed: an integer, "0e+00" in old versions, "N/A" when not checked."""
    value = _float(text)
    return None if value is None else int(value)


def collectives_in(runs: Iterable[NcclRun]) -> list[str]:
    return sorted({r.collective for r in runs if r.collective})
