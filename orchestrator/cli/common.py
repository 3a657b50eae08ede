"""Shared pieces of the CLI: the Typer apps, the root group that imports a command's module when
that command runs (LazyGroup), --json/--debug/--version, output helpers (-o and --query as in az,
tables fitted to the terminal, "did you mean" for filters), the store opener.

Only typer and the light base (errors, safetext) are imported at module level so `azbench --help`
stays fast; rich, jmespath, pyyaml and the store are imported when a command runs, each in the
one helper that needs it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Union

import typer
import typer.core
import typer.main
from typer import _click  # typer's own copy of click: the group's types

from orchestrator.errors import EXIT_CODES
from orchestrator.errors import ConfigError
from orchestrator.safetext import clean, clean_lines, json_text
from orchestrator.errors import NotFoundError

if TYPE_CHECKING:
    from datetime import datetime

    from jmespath.parser import ParsedResult
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from orchestrator.recipes.parallelism import Placement
    from orchestrator.store.database import Store

# A JSON value as json.loads returns it.
Json = Union[None, bool, int, float, str, list["Json"], dict[str, "Json"]]


def exit_codes_epilog() -> str:
    """The --help epilog: errors.EXIT_CODES, one code a line (\b keeps click from rewrapping)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code:>3} {meaning}" for code, meaning in EXIT_CODES.items())

class Unloaded(typer.core.TyperCommand):
    """A root command whose module is not imported yet: its name, the start of its help (what
    the root's --help shows of it), and `load`, which imports the module that registers it on
    `app`. cli/app.py lists them (LAZY); tests/test_cli.py holds each listing equal to the
    command's own."""

    def __init__(self, name: str, help_start: str, load: Callable[[], object]) -> None:
        super().__init__(name=name, help=help_start)
        self.load = load


# The root's commands by name, in --help's order; cli/app.py fills it before the app runs.
LAZY: dict[str, Unloaded] = {}


class LazyGroup(typer.core.TyperGroup):
    """The root group: every command of LAZY is listed (--help, "did you mean") from its
    Unloaded entry, and its module is imported only when that command runs or shows its help.

    Why: the command modules import their use cases at module level, which pulls pydantic,
    SQLAlchemy, jinja2 or numpy; `azbench --help` loads typer and cli/ only
    (benchmarks/bench_startup.py)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        loaded = dict(self.commands)  # what the modules imported so far registered
        self.commands.clear()  # LAZY's order, whatever was loaded first
        self.commands.update({name: loaded.pop(name, entry) for name, entry in LAZY.items()})
        self.commands.update(loaded)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        found = self.commands.get(cmd_name)
        if isinstance(found, Unloaded):
            found.load()
            built = typer.main.get_group(app).commands.get(cmd_name)  # now with the module's commands
            if built is None or isinstance(built, Unloaded):
                raise RuntimeError(f"loading '{cmd_name}' registered no such command")  # a bug in LAZY
            found = self.commands[cmd_name] = built
        return found

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """The Commands section from what is registered (an Unloaded entry's sentence): no
        command module is imported to show the root's --help."""
        names = [n for n, c in self.commands.items() if not c.hidden]
        if names:
            limit = formatter.width - 6 - max(len(n) for n in names)
            with formatter.section("Commands"):
                formatter.write_dl([(n, self.commands[n].get_short_help_str(limit)) for n in names])


app = typer.Typer(
    cls=LazyGroup,
    name="azbench",
    help="Provision Azure GPU clusters (or a local Slurm cluster), run MLPerf Training recipes, "
         "and report scores, scaling and cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog=exit_codes_epilog(),
)

_STATE = {"debug": False}
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout (the same as -o json).")


class OutputFormat(str, Enum):
    """-o, as az has it: the command's table, its JSON form, that form coloured (jsonc), as
    YAML (yaml, yamlc coloured), or as tab-separated values."""

    table = "table"
    json = "json"
    jsonc = "jsonc"
    yaml = "yaml"
    yamlc = "yamlc"
    tsv = "tsv"


OutputOpt = typer.Option(None, "--output", "-o", case_sensitive=False,
                         help="Output format, as in az: table (the default), json, jsonc "
                              "(coloured on a terminal), yaml, yamlc, or tsv (tab-separated "
                              "values without headers).")
QueryOpt = typer.Option(None, "--query", metavar="JMESPATH",
                        help="JMESPath query (https://jmespath.org) applied to the JSON form "
                             "before output, as in az; e.g. \"[].name\".")


def _show_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version
        try:
            found = version("azbench")
        except PackageNotFoundError:  # a source tree that was never installed
            found = "unknown (not installed)"
        sys.stdout.write(f"azbench {found}\n")
        raise typer.Exit()


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
          _version: bool = typer.Option(False, "--version", "-V", callback=_show_version,
                                        is_eager=True, help="Print azbench's version and exit.")) -> None:
    _STATE["debug"] = debug or bool(os.environ.get("AZBENCH_DEBUG"))


def confirm(question: str, yes: bool) -> None:
    """--yes, or a y/N prompt on a terminal; without a terminal refuse instead of hanging."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError(f"{question} needs confirmation: pass --yes (stdin is not a terminal)")
    if not typer.confirm(question, default=False):
        raise typer.Abort()


def parse_date(flag: str, value: str | None, end_of_day: bool = False) -> datetime | None:
    """A date or date-time flag as a UTC date-time (no zone: UTC); a bare date with `end_of_day`
    (--until) means the end of that day. ConfigError naming the flag otherwise."""
    if value is None:
        return None
    from datetime import datetime, timedelta, timezone

    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{flag}: '{value}' is not a date like 2026-11-01") from None
    if end_of_day and len(value.strip()) == 10:
        when += timedelta(days=1, microseconds=-1)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def check_number(flag: str, value: float | None, lo: float, hi: float) -> None:
    """A flag's number is finite and within [lo, hi]: Typer's ranges let nan through (every
    comparison with nan is false) and have no upper bound by default."""
    import math

    if value is not None and not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(f"{flag}: must be between {lo:g} and {hi:g}, got {value:g}")


def parse_params(items: list[str]) -> dict[str, Any]:
    """--param KEY=VALUE flags (run, plan, recipes show) as a dict of strings; a flag with no
    `=` or no key is a ConfigError naming it."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param: {item[:40]!r} is not KEY=VALUE")
        out[key.strip()] = value  # typed against the recipe's defaults by check_params
    return out


def placement_lines(p: Placement) -> str:
    """The parallelism map as `run --dry-run` and `recipes show` print it: the rank order and why,
    each dimension's link and reach, and what crosses the scale-out fabric."""
    reach = ", ".join(f"{d.upper()} {p.links[d]} ({s.nodes} node{'s' if s.nodes != 1 else ''}"
                      + (f", {s.racks} rack{'s' if s.racks != 1 else ''}" if p.racks else "") + ")"
                      for d, s in p.spans.items())
    return (f"placement: rank order {p.order} ({p.order_source}); {reach}\n"
            f"scale-out: {p.scale_out}\n")


# ---------------------------------------------------------------- output helpers

def to_jsonable(obj: Any) -> Any:
    from pydantic import BaseModel
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    return obj


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, default=str) + "\n")


PIPED_WIDTH = 100  # what a table gets in a pipe or a file when COLUMNS is not set


def output_width() -> int:
    """The width tables fit: $COLUMNS when set (piped or not), else the terminal's, else 100."""
    import shutil
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(40, int(columns))
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((PIPED_WIDTH, 24)).columns)
    return PIPED_WIDTH


def wrapped(line: str, width: int | None = None) -> str:
    """`line` (made safe: safetext.clean) wrapped to `width` (output_width()) at spaces, the
    following lines indented two; never inside a word, so a name or a run id stays whole."""
    import textwrap

    lines = textwrap.wrap(clean(line), output_width() if width is None else width,
                          subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines or [""]) + "\n"


def say(text: str, err: bool = False) -> None:
    """Write `text` to stdout (stderr with err=True) with no control, bidi or zero-width
    character (safetext.clean_lines; newlines kept): for every line that holds a file's, a
    folder's, a snapshot's or the cloud's text."""
    (sys.stderr if err else sys.stdout).write(clean_lines(text))


def make_console() -> Console:
    """A rich Console `output_width()` wide: $COLUMNS when set, else the terminal's, else 100
    (CI logs, files)."""
    from rich.console import Console
    return Console(width=output_width())


def make_table(title: str, columns: list[str], rows: Sequence[Sequence[object]], *,
               width: int | None = None) -> Table:
    """A rich table whose title and cells are text, never markup (`[bold red]` or `[link=...]`
    in a system's name prints as written), with control characters stripped (safetext.clean).

    It fits `width` (output_width()) with no cell cut: cells wrap at spaces, never inside a
    word (a run id, a name), and where the columns' longest words do not fit side by side the
    last columns are left out and the caption names them (fit_table)."""
    width = output_width() if width is None else width
    table, left_out = fit_table(title, [Col(h, rank=n) for n, h in enumerate(columns)], rows, width)
    if left_out:
        table.caption = cell_text(f"left out at {width} columns: {', '.join(left_out)} "
                                  "(a wider terminal shows them; -o json has every field)")
        table.caption_justify = "left"
    return table


def cell_text(value: object) -> Text:
    """A table cell as Rich Text: cleaned of control characters, not read as markup."""
    from rich.text import Text

    return Text(clean("" if value is None else str(value)))


@dataclass(frozen=True)
class Output:
    """How a command prints, from --json, -o and --query (as az does): its own rich table
    (`rich`), or its JSON form, after the query, as JSON, as TSV, or as a plain table."""

    format: OutputFormat = OutputFormat.table
    query: str | None = None
    compiled: ParsedResult | None = None

    @property
    def rich(self) -> bool:
        """True when the command prints its own table: -o table (the default) and no --query."""
        return self.format is OutputFormat.table and self.query is None

    def emit(self, data: object) -> None:
        """Print `data` (models, dataclasses, lists, dicts) in this format."""
        if self.format is OutputFormat.json and self.query is None:
            return emit_json(data)  # byte for byte what --json always printed
        self._write(json.loads(json.dumps(to_jsonable(data), default=str)))

    def emit_text(self, text: str) -> None:
        """Print a JSON document a renderer already made (the report's), in this format."""
        if self.format is OutputFormat.json and self.query is None:
            sys.stdout.write(json_text(text) + "\n")  # no raw ESC, bidi or zero-width character
            return
        self._write(json.loads(text))

    def _write(self, value: Json) -> None:
        if self.compiled is not None:
            value = _search(self.compiled, self.query or "", value)
        if self.format is OutputFormat.json:
            sys.stdout.write(json.dumps(value, indent=2) + "\n")
        elif self.format in (OutputFormat.jsonc, OutputFormat.yaml, OutputFormat.yamlc):
            _write_document(value, self.format)
        elif self.format is OutputFormat.tsv:
            sys.stdout.write("".join(line + "\n" for line in tsv_lines(value)))
        elif value is not None:
            columns, rows = plain_rows(value)
            make_console().print(make_table("", columns, rows))


def _write_document(value: Json, fmt: OutputFormat) -> None:
    """-o jsonc, yaml, yamlc: the JSON form as JSON or YAML (keys in the JSON form's order);
    the coloured ones are coloured only on a terminal, so a pipe gets plain text to parse."""
    import yaml

    if fmt is OutputFormat.jsonc:
        text, lexer = json.dumps(value, indent=2), "json"
    else:
        text, lexer = yaml.safe_dump(value, sort_keys=False, allow_unicode=True,
                                     default_flow_style=False), "yaml"
    if fmt is OutputFormat.yaml or not sys.stdout.isatty():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    from rich.syntax import Syntax
    make_console().print(Syntax(text.rstrip("\n"), lexer, background_color="default",
                                word_wrap=True))


def output(as_json: bool, fmt: OutputFormat | None, query: str | None) -> Output:
    """The Output for a command's --json, -o and --query; a bad query or a --json that
    contradicts -o is a ConfigError (exit 2) before the command does anything."""
    if as_json and fmt not in (None, OutputFormat.json):
        raise ConfigError(f"--json is -o json: it cannot be combined with -o {fmt.value if fmt else ''}")
    chosen = OutputFormat.json if as_json else (fmt or OutputFormat.table)
    return Output(chosen, query, None if query is None else _compile(query))


def tsv_lines(value: Json) -> list[str]:
    """az's -o tsv: one line per item of a list (a lone value is a list of one), an object's
    values in key order and a list's items tab-separated, no header; null is empty, booleans
    are true/false, tabs and newlines inside a value are escaped. Flat, as knack (az's output
    layer, knack/output.py _TsvOutput._dump_obj) writes it: a nested list is its length and a
    nested object an empty cell, so every row of a list has the same columns; --query picks
    what is inside them."""
    items = value if isinstance(value, list) else [value]
    lines = []
    for item in items:
        cells = list(item.values()) if isinstance(item, dict) else item if isinstance(item, list) else [item]
        lines.append("\t".join(_flat(c) for c in cells))
    return lines


def _flat(value: Json) -> str:
    """A TSV cell: a nested list's length, a nested object empty (knack), else the value."""
    if isinstance(value, list):
        return str(len(value))
    if isinstance(value, dict):
        return ""
    return _cell(value)


def plain_rows(value: Json) -> tuple[list[str], list[list[str]]]:
    """A queried JSON value as table columns and rows (as az's -o table after --query): a list
    of objects gives one column per key, a list of lists Column1..N, scalars one 'Result'."""
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(i, dict) for i in items):
        keys: dict[str, None] = {}
        for item in items:
            keys.update(dict.fromkeys(item if isinstance(item, dict) else {}))
        return list(keys), [[_cell(i.get(k)) if isinstance(i, dict) else "" for k in keys] for i in items]
    if items and all(isinstance(i, list) for i in items):
        width = max(len(i) if isinstance(i, list) else 0 for i in items)
        rows = [[_cell(c) for c in i] + [""] * (width - len(i)) if isinstance(i, list) else [] for i in items]
        return [f"Column{n + 1}" for n in range(width)], rows
    return ["Result"], [[_cell(i)] for i in items]


def _cell(value: Json) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    return clean(text.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n"))


def _compile(query: str) -> ParsedResult:
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(query)
    except JMESPathError as exc:
        raise ConfigError(f"--query: invalid JMESPath expression {query!r}: {_reason(exc)}") from None


def _search(compiled: ParsedResult, query: str, value: Json) -> Json:
    from jmespath.exceptions import JMESPathError

    try:
        found: Json = compiled.search(value)
    except JMESPathError as exc:
        raise ConfigError(f"--query {query!r}: {_reason(exc)}") from None
    return found


def _reason(exc: Exception) -> str:
    """jmespath's message in one line: its first line (the rest draws a caret) and the column."""
    from jmespath.exceptions import ArityError, ParseError
    first = (str(exc).splitlines() or [type(exc).__name__])[0].split(": Parse error at column")[0].rstrip(": ")
    for prefix in ("Invalid jmespath expression: ", "Bad jmespath expression: ", "Invalid JMESPath expression: "):
        first = first.removeprefix(prefix)
    column = exc.lex_position if isinstance(exc, ParseError) and not isinstance(exc, ArityError) else None
    if isinstance(column, int) and "column" not in first:
        first += f" (at column {column})"
    return first[:1].lower() + first[1:]


@dataclass(frozen=True)
class Col:
    """A column of a fitted table: its header, whether its cells may wrap at spaces, and its
    rank (0 = shown first; higher ranks are left out first when the terminal is narrow)."""

    header: str
    rank: int
    wrap: bool = True


def fit_table(title: str, columns: Sequence[Col], rows: Sequence[Sequence[object]],
              width: int) -> tuple[Table, list[str]]:
    """A table `width` columns wide where no cell is cut: columns are taken by rank while
    their narrowest form (the longest word, or the whole cell where it may not wrap) fits, and
    the space left is shared by the wrapping columns. Returns the table and the headers left out
    (say so under the table: -o json has every field)."""
    from rich.cells import cell_len
    from rich.table import Table
    cells = [[clean("" if v is None else str(v)) for v in row] for row in rows]

    def span(i: int) -> tuple[int, int]:
        texts = [columns[i].header] + [row[i] for row in cells]
        longest = max(cell_len(line) for t in texts for line in t.splitlines() or [""])
        if not columns[i].wrap:
            return longest, longest
        return max((cell_len(w) for t in texts for w in t.split()), default=1), longest

    spans = [span(i) for i in range(len(columns))]
    room = width - 1  # the left edge; each column adds its padding (2) and its right edge (1)
    kept: set[int] = set()
    for i in sorted(range(len(columns)), key=lambda n: columns[n].rank):
        if sum(spans[k][0] + 3 for k in kept) + spans[i][0] + 3 <= room:
            kept.add(i)
    order = sorted(kept)
    widths = _share([spans[i] for i in order], room - 3 * len(order))
    table = Table(title=cell_text(title), title_justify="left")
    for i, w in zip(order, widths):
        table.add_column(columns[i].header, width=w, no_wrap=not columns[i].wrap, overflow="fold")
    for row in cells:
        table.add_row(*[cell_text(row[i]) for i in order])
    return table, [columns[i].header for i in range(len(columns)) if i not in kept]


def _share(spans: list[tuple[int, int]], room: int) -> list[int]:
    """Widths between each (narrowest, widest) that add up to at most `room`: every column its
    widest when that fits, else the widest columns are narrowed first (short ones such as
    numbers keep their width), none below its narrowest."""
    widths = [hi for _, hi in spans]
    while sum(widths) > room:
        wide = [(w, n) for n, ((lo, _), w) in enumerate(zip(spans, widths)) if w > lo]
        if not wide:
            break
        _, n = max(wide)
        widths[n] -= 1
    return widths


def check_filter(what: str, value: str | None, stored: Sequence[str]) -> None:
    """A name filter (--benchmark bertt) that names none of the `stored` names: NotFoundError
    (exit 2) listing them and the nearest. Call it only when the store holds results."""
    import difflib

    if value is None or value in stored:
        return
    lowered = {name.lower(): name for name in stored}
    near = [lowered[n] for n in difflib.get_close_matches(value.lower(), list(lowered), n=3, cutoff=0.6)]
    shown = ", ".join(sorted(stored)[:8]) + (f", ... ({len(stored) - 8} more)" if len(stored) > 8 else "")
    hint = (f"stored: {shown}" if stored else f"no stored result has a {what}") + \
        (f"; did you mean {' or '.join(near)}?" if near else "")
    raise NotFoundError(f"no results for {what} '{value}'", hint=hint)


def open_store() -> Store:
    from orchestrator.store.database import Store  # lazy: +SQLAlchemy, pydantic: +0.3 s on --help (cli/app.py)
    return Store.open()
