"""The report for a terminal: a short view (best per benchmark, then one line per score) as data,
and a borderless plain-text rendering that fits a given width (100 columns by default).

`summary_view` turns a Report into a `View`: titled tables of typed cells (numbers stay numbers)
with stable column keys (ViewTable.data; `azbench report -o json|tsv` emits the whole Report);
`render_text` lays a View out as aligned text; when the width is short the columns marked
`shrink` (long names) move to a line of their own, never cut. Adding runs or the published
neighbours are options of the view, not other renderers. Returns strings; prints nothing.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from orchestrator import formats
from orchestrator.report.build import GroupReport, Report
from orchestrator.report.labels import cut_middle
from orchestrator.safetext import clean

Value = str | int | float | None
Fmt = Literal["text", "int", "minutes", "usd", "pct", "signed_pct", "factor"]
WIDTH = 100
GAP = "  "


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: Fmt = "text"
    shrink: bool = False  # may be cut (in the middle) to fit the width
    min_width: int = 8
    max_width: int = 0  # cut to this width whatever the room (0: no cap)
    suffix_key: str | None = None  # a row key whose text follows the number in the cell ("fp8")


@dataclass
class ViewTable:
    """Rows of one section; a row may carry `group` (a heading printed once above its rows)."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Value]] = field(default_factory=list)
    group_by: str | None = None  # a column key shown as a heading line, not as a column
    detail: str | None = None  # a key whose text is printed on its own line under the row

    def data(self) -> list[dict[str, Value]]:
        """The rows as plain data, numbers as numbers."""
        return [dict(r) for r in self.rows]


@dataclass
class View:
    heading: list[str]
    tables: list[ViewTable]
    footer: list[str] = field(default_factory=list)


def summary_view(report: Report, *, runs: bool = False, vs_published: bool = False) -> View:
    """Best per benchmark, then one line per score; `runs` adds every run, `vs_published` the
    nearest published result beside every score."""
    prefix = _common_prefix(report.groups)
    tables = [_best_table(report, prefix), _scores_table(report.groups, prefix),
              _explain_table(report.groups, prefix)]
    if vs_published:
        tables.append(_published_table(report.groups, prefix))
    if runs:
        tables.append(_runs_table(report.groups, prefix))
    return View(heading=_heading(report, prefix), tables=[t for t in tables if t.rows] or tables[1:2],
                footer=_footer(report, runs=runs))


def render_text(view: View, width: int = WIDTH) -> str:
    """The view as borderless aligned text no line of which is wider than `width`."""
    out = [part for line in view.heading
           for part in textwrap.wrap(clean(line), width, subsequent_indent="  ") or [""]]
    for table in view.tables:
        out += ["", *textwrap.wrap(clean(table.title), width, subsequent_indent="  ")]
        out += _table_lines(table, width)
    if view.footer:
        out.append("")
        out += [part for line in view.footer
                for part in textwrap.wrap(clean(line), width, subsequent_indent="  ",
                                          break_on_hyphens=False) or [""]]
    return "\n".join(out) + "\n"


# -- the view's tables ------------------------------------------------------------------------


def _heading(report: Report, prefix: str) -> list[str]:
    groups = report.groups
    results = sum(g.runs for g in groups)
    scored = sum(1 for g in groups if g.score_minutes is not None)
    gpus = sorted({g.gpu_type or "?" for g in groups})
    line = (f"azbench report: {results} results, {scored} scores, "
            f"{len({g.benchmark for g in groups})} benchmarks, {len({g.label for g in groups})} "
            f"systems on {', '.join(gpus) or 'no GPU'}")
    if report.filters:
        line += " (" + ", ".join(f"{k}={v}" for k, v in report.filters.items()) + ")"
    lines = [line, "score = the MLPerf score as MLCommons publishes it: olympic mean x "
                   "scaling.json, in minutes",
             "$/result = the runs one MLPerf score needs (the benchmark's required runs), each at "
             "its own minutes, at Azure list price (the catalog's, or --price) for the same GPUs "
             "on Azure VMs; MFU = model FLOP/s at the median step / the dense peak of the "
             "precision beside it (from the run's log or the config its system ran, else the "
             "recipe's assumption); - = unknown; how each was got, or why not: --markdown or "
             "--json; each figure's one definition: docs/figures.md"]
    if prefix:
        lines.append(f"systems are all under {prefix.rstrip('/')}/ (left out below)")
    return lines


def _best_table(report: Report, prefix: str) -> ViewTable:
    cols = [Column("benchmark", "benchmark", min_width=10), _gpu_column(),
            Column("score", "score", "minutes"), Column("system", "system", shrink=True, min_width=14),
            Column("gpus", "GPUs", "int", min_width=5), Column("cost", "$/result", "usd"),
            _mfu_column()]
    rows: list[dict[str, Value]] = [
        {"benchmark": b.benchmark, "gpu": b.gpu_type, "score": b.score_minutes,
         "system": _strip(b.system, prefix), "gpus": b.gpus, "cost": b.cost_per_result_usd,
         "mfu": b.mfu, "mfu_precision": b.mfu_precision if b.mfu is not None else None}
        for b in report.best]
    return ViewTable("best", "Best per benchmark: the fastest official score per GPU type", cols,
                     rows)


def _scores_table(groups: Sequence[GroupReport], prefix: str) -> ViewTable:
    cols = [Column("system", "system", shrink=True, min_width=16), _gpu_column(),
            Column("gpus", "GPUs", "int", min_width=5), Column("score", "score", "minutes"),
            Column("kind", "kind", min_width=10), Column("cost", "$/result", "usd"),
            _mfu_column()]
    rows: list[dict[str, Value]] = [
        {"benchmark": g.benchmark, "system": _strip(g.label, prefix), "gpu": g.gpu_type,
         "gpus": g.gpus, "score": g.score_minutes, "raw_mean": g.score_raw_minutes,
         "scaling": g.scaling_factor, "kind": g.kind, "cost": g.cost_per_result_usd,
         "mfu": g.mfu, "mfu_precision": g.mfu_precision if g.mfu is not None else None}
        for g in groups]
    return ViewTable("scores", "Scores, one line per benchmark and system (the raw olympic means "
                               "and scaling factors are in --markdown and --json)", cols, rows,
                     group_by="benchmark")


def _explain_table(groups: Sequence[GroupReport], prefix: str) -> ViewTable:
    """The step model beside the measured median step (explain.account), groups it covers only."""
    cols = [Column("system", "system", shrink=True, min_width=16), Column("gpus", "GPUs", "int", min_width=5),
            Column("measured", "step (s)", "minutes"), Column("predicted", "model (s)", "minutes"),
            Column("error", "error", "signed_pct")]
    rows: list[dict[str, Value]] = []
    for g in groups:
        e = g.explain
        if e is None:
            continue
        rows.append({"benchmark": g.benchmark, "system": _strip(g.label, prefix), "gpus": g.gpus,
                     "measured": e.measured_step_s, "predicted": e.predicted_step_s, "error": e.error})
    # The parts themselves (compute, tp_comm, dp_comm, ...) would put a second long cell beside the
    # system name on every row: they are in --markdown, --json and `azbench explain`.
    return ViewTable("explain", "The step explained: the model's step beside the measured median step "
                     "(its parts: azbench explain, --markdown, --json)", cols, rows, group_by="benchmark")


def _published_table(groups: Sequence[GroupReport], prefix: str) -> ViewTable:
    cols = [Column("system", "system", shrink=True, min_width=16), _gpu_column(),
            Column("gpus", "GPUs", "int", min_width=5),
            Column("score", "score", "minutes"), Column("as_published", "published", min_width=9),
            Column("published", "nearest", "minutes"), Column("delta", "delta", "signed_pct"),
            Column("nearest_gpus", "its GPUs", "int", min_width=8), Column("basis", "basis", min_width=7)]
    rows: list[dict[str, Value]] = []
    for g in groups:
        n = g.published
        rows.append({"benchmark": g.benchmark, "system": _strip(g.label, prefix),
                     "gpu": g.gpu_type, "gpus": g.gpus, "score": g.score_minutes,
                     "as_published": _as_published(g),
                     "published": n.score_minutes if n else None, "delta": n.delta if n else None,
                     "nearest_gpus": n.gpus if n else None,
                     "basis": (("per GPU" if n.per_gpu else "=GPUs") if n else None),
                     "per_gpu": n.per_gpu if n else None,
                     "neighbour": f"nearest: {n.round} {n.submitter} {n.system}" if n
                     else _no_neighbour(g)})
    return ViewTable("vs_published", "Beside the published record (closed division, same "
                     "accelerator): at the same GPU count (basis =GPUs) delta = score / published "
                     "- 1; where none is published at that count, the nearest count compared per "
                     "GPU (basis 'per GPU'): delta = score x GPUs / (its score x its GPUs) - 1; + "
                     "is slower; published '=' means this result is itself a published one and "
                     "its score equals the published score", cols, rows, group_by="benchmark",
                     detail="neighbour")


def _runs_table(groups: Sequence[GroupReport], prefix: str) -> ViewTable:
    cols = [Column("system", "system", shrink=True, min_width=16), Column("run", "run", "int", min_width=3),
            Column("status", "status", min_width=8), Column("minutes", "minutes", "minutes"),
            Column("scored", "scored", min_width=7),
            Column("median_step_s", "step (s)", "minutes"),
            Column("compliance", "compliance", min_width=10)]
    verdicts = {None: "not checked", True: "pass", False: "FAIL"}
    rows: list[dict[str, Value]] = [
        {"benchmark": g.benchmark, "system": _strip(g.label, prefix), "run": i,
         "status": r.status, "minutes": r.minutes,
         "scored": "resumed" if r.resumed else ("yes" if r.scored else ""),
         "median_step_s": r.median_step_s, "compliance": verdicts[r.compliance_ok]}
        for g in groups for i, r in enumerate(g.run_lines)]
    return ViewTable("runs", "Runs (launch order; scored = in the olympic mean)", cols, rows,
                     group_by="benchmark")


def _footer(report: Report, *, runs: bool) -> list[str]:
    more = [(len(report.strong_scaling), "strong scaling pairs"),
            (len(report.weak_scaling), "weak scaling points"),
            (len(report.speedups), "SKU speedups"),
            (sum(1 for g in report.groups if g.step_stats), "step-time summaries"),
            (len(report.attempt_history), "attempt history lines"),
            (len(report.preemptions), "spot preemptions"),
            (len(report.replacements), "node replacements")]
    shown = [f"{what} {n}" for n, what in more if n]
    if not runs:
        shown.insert(0, f"runs {sum(g.runs for g in report.groups)} (--runs)")
    lines = ["more: " + ", ".join(shown) + "; all of it in --markdown, --json, --html DIR"] \
        if shown else []
    verdicts = Counter(g.verdict for g in report.groups
                       if g.score_minutes is not None and not g.official)
    lines += [f"{n} score{'s' if n > 1 else ''}: {text}" for text, n in sorted(verdicts.items())]
    warnings = [n for n in report.notes if n.startswith("warning:")]
    others = [n for n in report.notes if not n.startswith("warning:")]
    lines += warnings
    if len(others) <= 3:
        return lines + [f"note: {n}" for n in others]
    kinds = Counter(_note_kind(n) for n in others)
    return lines + [f"notes: {len(others)}, " + "; ".join(
        f"{c} x {k}" for k, c in kinds.most_common(3)) + " (all in --markdown)"]


def _note_kind(note: str) -> str:
    """'weak scaling … skipped: batch per GPU differs …' for every such pair's note."""
    head, sep, why = note.rpartition(": ")
    words = head.split()
    return f"{' '.join(words[:2])} ...: {why}" if sep and len(words) > 2 else note


# -- layout -----------------------------------------------------------------------------------


def _mfu_column() -> Column:
    """MFU with the precision it is measured against beside it: "24.2% fp4"."""
    return Column("mfu", "MFU", "pct", min_width=5, suffix_key="mfu_precision")


def _gpu_column() -> Column:
    return Column("gpu", "GPU", min_width=5)  # never capped: a GPU type is a name the user tells apart


def _table_lines(table: ViewTable, width: int) -> list[str]:
    """The table's lines, none wider than `width` and no name cut. A long name (a `shrink`
    column) that does not fit its column moves to a line of its own (above its row when the
    column leads the row, else below it) and leaves its cell blank; when not even the column's
    `min_width` fits, every row's names move (the column is stacked)."""
    indent = "  " if table.group_by else ""
    cells = [[_cell(r, c) for c in table.columns] for r in table.rows]
    long = [i for i, c in enumerate(table.columns) if c.shrink]
    widths, stacked = _widths(table, cells, width - len(indent))
    inline = [i for i in range(len(table.columns)) if i not in stacked]
    above = bool(long) and long[0] == 0
    row_indent = indent + ("    " if above and stacked else "")
    columns = [table.columns[i] for i in inline]
    fitted = _shrink(columns, [widths[i] for i in inline], width - len(row_indent))
    fit = dict(zip(inline, fitted))
    pad = indent if above else indent + "    "

    def names(values: Sequence[str]) -> list[str]:
        text = "  ".join(v for v in values if v)
        return textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad,
                             break_long_words=False, break_on_hyphens=False) if text else []

    head_names = names([table.columns[i].header for i in stacked])
    out = head_names if above else []
    out.append(row_indent + _row([table.columns[i].header for i in inline], columns, fitted))
    out += [] if above else head_names
    shown: list[Value] = []  # the heading printed last
    for r, row in zip(table.rows, cells):
        if table.group_by and (not shown or r.get(table.group_by) != shown[-1]):
            shown.append(r.get(table.group_by))
            out += textwrap.wrap(clean(str(shown[-1])), width, break_on_hyphens=False)
        moved = [i for i in long if i in stacked or len(row[i]) > fit[i]]
        own = names([row[i] for i in moved])
        out += own if above else []
        out.append(row_indent + _row(["" if i in moved else row[i] for i in inline], columns, fitted))
        out += [] if above else own
        if table.detail and r.get(table.detail):
            out += textwrap.wrap(clean(str(r[table.detail])), width, break_on_hyphens=False,
                                 initial_indent=f"{indent}    ", subsequent_indent=f"{indent}      ")
    return out


def _widths(table: ViewTable, cells: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[int]]:
    """(each column's width, the stacked columns): the widest cell of each, up to its
    max_width; the long-name (`shrink`) columns share what is left of `width`, or, when that
    share is below a column's min_width or header, are stacked (their names on lines of their own)."""
    widths = [max([len(c.header)] + [len(row[i]) for row in cells])
              for i, c in enumerate(table.columns)]
    widths = [min(w, c.max_width) if c.max_width else w for w, c in zip(widths, table.columns)]
    long = [i for i, c in enumerate(table.columns) if c.shrink]
    others = sum(w for i, w in enumerate(widths) if i not in long)
    room = width - others - len(GAP) * (len(widths) - 1)
    if not long or sum(widths[i] for i in long) <= room:
        return widths, []
    share = room // len(long)
    if all(share >= max(table.columns[i].min_width, len(table.columns[i].header)) for i in long):
        return [share if i in long else w for i, w in enumerate(widths)], []
    return widths, long


def _shrink(columns: Sequence[Column], widths: list[int], width: int) -> list[int]:
    """Cut the shrinkable columns, widest first, until the row fits (never below min_width)."""
    out = list(widths)
    over = sum(out) + len(GAP) * (len(out) - 1) - width
    while over > 0:
        cuttable = [i for i, c in enumerate(columns) if c.shrink and out[i] > c.min_width]
        if not cuttable:
            break
        i = max(cuttable, key=lambda k: out[k])
        out[i] -= 1
        over -= 1
    return out


def _row(cells: Sequence[str], columns: Sequence[Column], widths: Sequence[int]) -> str:
    parts = []
    for text, col, w in zip(cells, columns, widths):
        text = cut_middle(text, w)
        parts.append(text.ljust(w) if col.fmt == "text" else text.rjust(w))
    return GAP.join(parts).rstrip()


def _cell(row: dict[str, Value], col: Column) -> str:
    text = _format(row.get(col.key), col.fmt)
    suffix = row.get(col.suffix_key) if col.suffix_key else None
    return f"{text} {suffix}" if suffix and text != "-" else text


def _format(value: Value, fmt: Fmt) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, str) or fmt == "text":
        return clean(str(value))  # names come from folders and logs: no terminal controls
    number = float(value)
    if fmt == "int":
        return formats.count(number)
    if fmt == "usd":
        return formats.fixed(number, 2)
    if fmt == "pct":
        return formats.pct(number)
    if fmt == "signed_pct":
        return formats.pct(number, signed=True)
    if fmt == "factor":
        return formats.fixed(number, 4)
    return formats.fixed(number, 3 if number < 1000 else 1)


def _common_prefix(groups: Iterable[GroupReport]) -> str:
    """'round/submitter/' when every group shares it, else ''."""
    prefixes = {g.label[: len(g.label) - len(g.system)] for g in groups}
    return prefixes.pop() if len(prefixes) == 1 else ""


def _strip(label: str, prefix: str) -> str:
    return label[len(prefix):] if prefix and label.startswith(prefix) else label


def _as_published(g: GroupReport) -> str:
    if g.published_score_minutes is None:
        return "-"
    if g.is_published_score:
        return "="
    return _format(g.published_score_minutes, "minutes")


def _no_neighbour(g: GroupReport) -> str:
    if not g.gpus:
        return "none: GPU count unknown"
    return f"none published for {g.gpu_type or 'this GPU'} on {g.benchmark}"
