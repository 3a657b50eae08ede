"""Render a report.Report as JSON or Markdown, and the sections both share (the terminal's view
is report/terminal.py, the interactive site report/site.py).

Every renderer returns data (a string); none prints.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from orchestrator import formats
from orchestrator.safetext import clean, markdown
from orchestrator.report.build import GroupReport, Report, history_section
from orchestrator.fabric.lines import fabric_section
from orchestrator.report.preemption import preemption_section
from orchestrator.report.replacements import replacement_section

Cell = str
_Section = tuple[str, list[str], list[list[Cell]]]  # title, header, rows


def to_json(report: Report) -> str:
    return report.model_dump_json(indent=2)


def to_markdown(report: Report) -> str:
    """A GitHub-flavoured Markdown document: one table per section, then notes."""
    out = ["# azbench report", "", f"Generated {report.generated_at:%Y-%m-%d %H:%M:%S} UTC."]
    if report.filters:
        out.append("Filters: " + md_text(", ".join(f"{k}={v}" for k, v in report.filters.items())) + ".")
    for title, header, rows in sections(report):
        out += ["", f"## {title}", "", _md_row(header), _md_row(["---"] * len(header))]
        out += [_md_row(r) for r in rows]
    if report.notes:
        out += ["", "## Notes", ""] + [f"- {md_text(n)}" for n in report.notes]
    return "\n".join(out) + "\n"


# A GitHub comment holds at most 65,536 characters; each part stays under it.
PART_LIMIT = 65_536


def markdown_parts(report: Report, limit: int = PART_LIMIT) -> list[tuple[str, str]]:
    """The Markdown report as (file name, text) parts, each under `limit` characters: index.md
    (the heading, the best per benchmark, a link per benchmark's part with its systems, every
    section without a benchmark column, the notes) and one part per benchmark (each section's
    rows of that benchmark), split into NAME-2.md, NAME-3.md... where one would not fit."""
    secs = sections(report)
    benchmarks = list(dict.fromkeys(g.benchmark for g in report.groups))
    files = {b: _part_name(b) for b in benchmarks}
    parts: list[tuple[str, str]] = []
    for bench in benchmarks:
        chosen = [(t, h, [r for r in rows if r[0] == bench]) for t, h, rows in secs if h[:1] == ["benchmark"]]
        head = [f"# azbench report: {md_text(bench)}", "",
                f"Generated {report.generated_at:%Y-%m-%d %H:%M:%S} UTC; part of [the report](index.md)."]
        parts += _packed(files[bench], head, [c for c in chosen if c[2]], limit)
    systems = {b: len({g.label for g in report.groups if g.benchmark == b}) for b in benchmarks}
    index = ["# azbench report", "", f"Generated {report.generated_at:%Y-%m-%d %H:%M:%S} UTC."]
    if report.filters:
        index.append("Filters: " + md_text(", ".join(f"{k}={v}" for k, v in report.filters.items())) + ".")
    index += ["", "## Benchmarks", ""]
    for bench in benchmarks:
        names = [n for n, _ in parts if n == files[bench] or n.startswith(files[bench][:-3] + "-")]
        more = f" (in {len(names)} parts: " + ", ".join(f"[{n}]({n})" for n in names[1:]) + ")" if len(names) > 1 else ""
        index.append(f"- [{md_text(bench)}]({files[bench]}): {systems[bench]} system{'s' if systems[bench] != 1 else ''}{more}")
    best = _best_section(report)
    rest = [best] * bool(best[2]) + [sec for sec in secs if sec[1][:1] != ["benchmark"]]
    tail = [f"- {md_text(n)}" for n in report.notes]
    packed = _packed("index.md", index, rest, limit, tail=["", "## Notes", "", *tail] if tail else [])
    return [*packed, *parts]


def _part_name(bench: str) -> str:
    """A file name for a benchmark's part: its name with anything but [A-Za-z0-9_.-] as '_'."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", bench) or "benchmark"
    return f"{name}.md" if name != "index" else "index-benchmark.md"


def _packed(name: str, head: list[str], secs: Sequence[_Section], limit: int,
            tail: Sequence[str] = ()) -> list[tuple[str, str]]:
    """`head`, then each section (its title and header repeated in each file it continues in),
    then `tail`, packed into files of under `limit` characters: NAME.md, NAME-2.md, ..."""
    files: list[list[str]] = [list(head)]

    def size(lines: Sequence[str]) -> int:
        return sum(len(line) + 1 for line in lines)

    for title, header, rows in secs:
        top = ["", f"## {title}", "", _md_row(header), _md_row(["---"] * len(header))]
        cont = ["", f"## {title} (continued)", "", top[3], top[4]]
        if size(files[-1]) + size(top) + (size([_md_row(rows[0])]) if rows else 0) >= limit:
            files.append([f"# {head[0].lstrip('# ')} (continued)"])
        files[-1] += top
        for row in rows:
            line = _md_row(row)
            if size(files[-1]) + len(line) + 1 >= limit:
                files.append([f"# {head[0].lstrip('# ')} (continued)", *cont])
            files[-1].append(line)
    for line in tail:
        if size(files[-1]) + len(line) + 1 >= limit:
            files.append([f"# {head[0].lstrip('# ')} (continued)"])
        files[-1].append(line)
    stem = name[:-3]
    return [(name if i == 0 else f"{stem}-{i + 1}.md", "\n".join(lines) + "\n") for i, lines in enumerate(files)]


def sections(report: Report) -> list[_Section]:
    """The report as (title, header, rows) of display strings; empty sections left out."""
    out = [_best_section(report), _results_section(report.groups), _runs_section(report.groups),
           _steps_section(report.groups), _explain_section(report.groups), _mfu_section(report.groups),
           _cost_section(report.groups)]
    out.append(("Strong scaling (time-to-train)",
                ["benchmark", "small -> large", "GPUs", "GBS", "speedup", "E_strong",
                 "E_strong x scaling", "throughput/GPU eff."],
                [[s.benchmark, f"{s.small} -> {s.large}", f"{_i(s.workers_small)} -> {_i(s.workers_large)}",
                  f"{_i(s.gbs_small)} -> {_i(s.gbs_large)}", _f(s.speedup, 4), _pct(s.efficiency),
                  _pct(s.efficiency_scaled), _pct(s.throughput_efficiency)]
                 for s in report.strong_scaling]))
    out.append(("Weak scaling (step time, fixed work per worker)",
                ["benchmark", "base -> system", "nodes", "step base (s)", "step (s)",
                 "E_weak = t_base/t", "step change", "min/max (Azure-style)"],
                [[w.benchmark, f"{w.base} -> {w.system}", f"{_i(w.nodes_base)} -> {_i(w.nodes)}",
                  _f(w.step_base_s, 4), _f(w.step_s, 4), _pct(w.efficiency),
                  _signed_pct(w.step_change), _pct(w.min_max)]
                 for w in report.weak_scaling]))
    out.append(("Speedup between SKUs (same GPU count, same round unless asked)",
                ["benchmark", "GPUs", "a (slower) -> b", "rounds", "minutes a", "minutes b",
                 "speedup", "per GPU", "per dollar"],
                [[s.benchmark, _i(s.workers), f"{s.system_a} ({s.sku_a}) -> {s.system_b} ({s.sku_b})",
                  (f"{s.round_a or '?'} vs {s.round_b or '?'}: mixed rounds" if s.mixed_rounds
                   else s.round_a or "-"), _f(s.minutes_a, 3),
                  _f(s.minutes_b, 3), _f(s.speedup, 3), _f(s.speedup_per_gpu, 3),
                  _f(s.speedup_per_dollar, 3)] for s in report.speedups]))
    out.append(history_section(report.attempt_history))
    out.append(preemption_section(report.preemptions))
    out.append(replacement_section(report.replacements))
    out.append(fabric_section(report.fabric))
    return [s for s in out if s[2]]


# -- sections ------------------------------------------------------------------------------


def _best_section(report: Report) -> _Section:
    header = ["benchmark", "GPU", "MLPerf score (min)", "system", "GPUs", "$ / result", "MFU",
              "official scores"]
    rows = [[b.benchmark, b.gpu_type, _f(b.score_minutes, 4), b.system, _i(b.gpus),
             _f(b.cost_per_result_usd, 2),
             f"{_pct(b.mfu)} ({b.mfu_precision})" if b.mfu is not None else "-", _i(b.scores)]
            for b in report.best]
    return "Best per benchmark (fastest official MLPerf score per GPU type)", header, rows


def _results_section(groups: Sequence[GroupReport]) -> _Section:
    header = ["benchmark", "system", "GPU", "nodes", "GPUs", "runs (req.)", "converged",
              "MLPerf score (min)", "raw mean (min)", "scaling", "kind", "published as (min)",
              "nearest published", "vs nearest (basis)", "note"]
    rows = [[g.benchmark, g.label, g.gpu_type or "-", _i(g.nodes), _i(g.gpus),
             f"{_i(g.runs)} ({_i(g.required_runs)})", _i(g.converged), _f(g.score_minutes, 4),
             _f(g.score_raw_minutes, 4), _f(g.scaling_factor, 4),
             g.verdict if g.score_minutes is not None else g.kind,
             _f(g.published_score_minutes, 4),
             f"{g.published.config}: {_f(g.published.score_minutes, 4)}" if g.published else "-",
             (f"{_signed_pct(g.published.delta)} ({g.published.basis})"
              if g.published and g.published.delta is not None else "-"), g.score_note]
            for g in groups]
    return "Results per system (MLPerf score = raw olympic mean x scaling)", header, rows


def _runs_section(groups: Sequence[GroupReport]) -> _Section:
    header = ["benchmark", "system", "run", "status", "minutes", "scored", "progress",
              "progress/min", "median step (s)", "slowest node (x median)", "compliance"]
    rows = []
    verdicts = {None: "not checked", True: "pass", False: "FAIL"}
    for g in groups:
        for i, r in enumerate(g.run_lines):
            flag = "resumed" if r.resumed else ("yes" if r.scored else "")
            rows.append([g.benchmark, g.label, str(i), r.status, _f(r.minutes, 4), flag,
                         _f(r.progress, 0), _f(r.progress_per_minute, 1), _f(r.median_step_s, 4),
                         f"{r.slowest_node} ({r.node_spread:.2f})" if r.slowest_node else "-",
                         verdicts[r.compliance_ok]])
    return "Time to train per run", header, rows


def _steps_section(groups: Sequence[GroupReport]) -> _Section:
    header = ["benchmark", "system", "nodes", "steps", "median (s)", "mean (s)", "p99 (s)",
              "CV", "slow steps", "throughput/min", "per GPU/min", "model TF/s/GPU", "MFU",
              "MFU bf16", "step source"]
    rows = [[g.benchmark, g.label, _i(g.nodes), _i(s.count), _f(s.median, 4), _f(s.mean, 4),
             _f(s.p99, 4), _pct(s.cv), _i(s.slow_steps), _f(g.throughput_per_minute, 1),
             _f(g.throughput_per_worker_minute, 3), _f(g.model_tflops_per_gpu, 1), _mfu(g),
             _pct(g.mfu_bf16) + (f" (vs dense BF16, over 100%: the run is {g.mfu_precision}; "
                                 "not a utilisation)" if (g.mfu_bf16 or 0) > 1 else ""),
             g.step_time_source or "-"]
            for g in groups if (s := g.step_stats) is not None]
    # "MFU bf16" is MFU against dense BF16 (kept short: the column's name is read by scripts); a
    # run that computes in FP8/FP4 can pass 100% there, and the cell says so.
    return "Step times and throughput", header, rows


def _explain_section(groups: Sequence[GroupReport]) -> _Section:
    """The step model beside the measured median step, with every part (they add up to it)."""
    parts = ["compute", "tp_comm", "cp_comm", "ep_comm", "pp_bubble", "pp_p2p", "dp_comm", "optimizer", "other"]
    header = ["benchmark", "system", "measured step (s)", "model step (s)", "error", *parts, "note"]
    rows = [[g.benchmark, g.label, _f(g.explain.measured_step_s, 4), _f(g.explain.predicted_step_s, 4),
             _signed_pct(g.explain.error), *[_f(g.explain.components.get(k), 4) for k in parts],
             "not predicted: " + "; ".join(g.explain.not_predicted) if g.explain.not_predicted else g.explain.source]
            for g in groups if g.explain is not None]
    return "The step explained (model parts in seconds; azbench explain)", header, rows


def _mfu_section(groups: Sequence[GroupReport]) -> _Section:
    """Where each MFU figure's parts were read (formula, step time, precision, peak) or why it
    is blank: the precision may be the recipe's assumption, and the cell alone does not say."""
    rows = [[g.benchmark, g.label, _mfu(g), g.mfu_note] for g in groups if g.mfu_note]
    return "MFU: how each was computed, or why it is blank", ["benchmark", "system", "MFU", "how"], rows


def _cost_section(groups: Sequence[GroupReport]) -> _Section:
    header = ["benchmark", "system", "$/VM-hour", "per result ($)", "per run ($)", "all runs ($)",
              "all attempts ($)", "note"]
    rows = [[g.benchmark, g.label, _f(g.price_per_vm_hour, 2), _f(g.cost_per_result_usd, 2),
             _f(g.cost_per_run_usd, 2), _f(g.cost_all_runs_usd, 2), _f(g.cost_all_attempts_usd, 2),
             g.cost_note] for g in groups]
    return ("Cost (per result: the runs one MLPerf score needs, each at its own minutes; per run: "
            "one run as long as the raw olympic mean)", header, rows)


# -- formatting ----------------------------------------------------------------------------


def _f(v: float | None, digits: int) -> str:
    return formats.fixed(v, digits)


def _i(v: int | None) -> str:
    return formats.count(v)


def _mfu(g: GroupReport) -> str:
    """MFU against the dense peak of the precision the runs trained in, named: '44.5% (fp8)'."""
    return f"{_pct(g.mfu)} ({g.mfu_precision})" if g.mfu is not None else "-"


def _signed_pct(v: float | None) -> str:
    return formats.pct(v, 2, signed=True)


def _pct(v: float | None) -> str:
    return formats.pct(v, 2)


def _md_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def md_text(value: object) -> str:
    """Markdown from any text (names come from folders and logs): control characters
    stripped, `&` and `<` escaped (`<a href="javascript:...">` shows as written, never as a
    tag; `->` stays as it is), `[`, `]` and the backslash escaped (no Markdown link):
    safetext.markdown."""
    return markdown(value)


def md_cell(value: object) -> str:
    """md_text for a table cell: `|` escaped too (no extra column)."""
    return markdown(value, cell=True)

