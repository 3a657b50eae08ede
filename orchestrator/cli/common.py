"""Shared pieces of the CLI: the Typer apps, --json/--debug, output helpers, the store opener.

Only typer is imported at module level so `azbench --help` stays fast; rich and the store are
imported when a command runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.errors import EXIT_CODES

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from orchestrator.store.database import Store


def exit_codes_epilog() -> str:
    """The --help epilog: errors.EXIT_CODES, one code a line (\b keeps click from rewrapping)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code:>3} {meaning}" for code, meaning in EXIT_CODES.items())

app = typer.Typer(
    name="azbench",
    help="Provision Azure GPU clusters (or a local Slurm cluster), run MLPerf Training recipes, "
         "and report scores, scaling and cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog=exit_codes_epilog(),
)
recipes_app = typer.Typer(help="List and inspect benchmark recipes.", no_args_is_help=True,
                          rich_markup_mode=None)
results_app = typer.Typer(help="Stored results: list, show, import MLPerf logs.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(recipes_app, name="recipes")
app.add_typer(results_app, name="results")

_STATE = {"debug": False}
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    _STATE["debug"] = debug or bool(os.environ.get("AZBENCH_DEBUG"))


def confirm(question: str, yes: bool) -> None:
    """--yes, or a y/N prompt on a terminal; without a terminal refuse instead of hanging."""
    from orchestrator.errors import ConfigError
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError(f"{question} needs confirmation: pass --yes (stdin is not a terminal)")
    if not typer.confirm(question, default=False):
        raise typer.Abort()


def check_number(flag: str, value: float | None, lo: float, hi: float) -> None:
    """A flag's number is finite and within [lo, hi]: Typer's ranges let nan through (every
    comparison with nan is false) and have no upper bound by default."""
    import math

    from orchestrator.errors import ConfigError
    if value is not None and not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(f"{flag}: must be between {lo:g} and {hi:g}, got {value:g}")


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


def make_console() -> Console:
    """A rich Console; when piped (CI logs, files) it is wide, so tables do not fold to 80 columns."""
    from rich.console import Console
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        return Console(width=200)
    return Console()


def make_table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    from rich.table import Table
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    return table


def open_store() -> Store:
    from orchestrator.store.database import Store
    return Store.open()
