"""The azbench command line: the root's table of commands, and the one error handler (`main`)
that maps AzbenchError subclasses to one stderr line and an exit code.

Start-up stays light: `azbench --help` imports typer and this module's light base only. Each
command's module (cli/clusters.py, cli/report.py...) imports its use cases at module level, and is
imported by LazyGroup (cli/common.py) only when one of its commands runs: the loaders below hold
the only imports of the command modules.
"""


from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import NoReturn

import typer
import typer.core

from orchestrator.cli.common import LAZY, _STATE, Unloaded, app
from orchestrator.errors import EXIT_INTERRUPTED, AzbenchError, ConfigError, MissingExtra, StoreError
from orchestrator.paths import home
from orchestrator.safetext import shown

# ---------------------------------------------------------------- the commands, by module
# Each loader imports one command module, which registers its commands on `app`; its comment
# says what that adds to `azbench --help`: the libraries, and the module's import time over the
# help path's own imports (orchestrator.cli.app: typer, cli.common, the light base), best of 5,
# measured in one run on a 2-core machine (issue 44). `azbench --help` itself:
# benchmarks/bench_startup.py.


def _catalog() -> object:
    from orchestrator.cli import catalog  # lazy: +pydantic, pyyaml: 1.4x the help path's imports
    return catalog


def _clusters() -> object:
    from orchestrator.cli import clusters  # lazy: +pydantic, SQLAlchemy: 5.9x the help path's imports
    return clusters


def _run() -> object:
    from orchestrator.cli import run  # lazy: +pydantic, SQLAlchemy, jinja2: 8.8x the help path's imports
    return run


def _recipes() -> object:
    from orchestrator.cli import recipes  # lazy: +pydantic, SQLAlchemy, jinja2: 7.0x the help path's imports
    return recipes


def _report() -> object:
    from orchestrator.cli import report  # lazy: +pydantic, SQLAlchemy, jinja2, numpy: 16.9x the help path's imports
    return report


def _results() -> object:
    from orchestrator.cli import results  # lazy: +pydantic, SQLAlchemy, jinja2, numpy: 12.6x the help path's imports
    return results


def _health() -> object:
    from orchestrator.cli import health  # lazy: +pydantic, SQLAlchemy, jinja2: 9.8x the help path's imports
    return health


def _resize() -> object:
    from orchestrator.cli import resize  # lazy: +pydantic, pyyaml: 1.8x the help path's imports
    return resize


def _plan() -> object:
    from orchestrator.cli import plan  # lazy: +pydantic, SQLAlchemy, numpy: 3.0x the help path's imports
    return plan


def _goodput() -> object:
    from orchestrator.cli import goodput  # lazy: +pydantic, SQLAlchemy: 2.4x the help path's imports
    return goodput


def _explain() -> object:
    from orchestrator.cli import explain  # lazy: +pydantic, SQLAlchemy, numpy: 2.0x the help path's imports
    return explain


def _pipeline() -> object:
    from orchestrator.cli import pipeline  # lazy: +pydantic, SQLAlchemy, jinja2, numpy: 7.3x the help path's imports
    return pipeline


def _fabric() -> object:
    from orchestrator.cli import fabric_locate  # lazy: +pydantic, SQLAlchemy, jinja2: 6.2x the help path's imports
    return fabric_locate


# In `azbench --help`'s order: (name, its loader, the start of its help: its first sentence, or
# the words past what the widest listing shows, 72 characters; tests/test_cli.py holds them equal).
_COMMANDS = (
    ("catalog", _catalog, 'The GPU VM sizes azbench knows (prices are list-price estimates).'),
    ("init", _catalog, 'Write a commented example cluster.yaml.'),
    ("up", _clusters, 'Provision a cluster (or adopt the running one of the same name).'),
    ("down", _clusters, 'Delete everything the cluster owns and verify nothing is left.'),
    ("adopt", _clusters, 'Rebuild the record of a live cluster this home does not know (a lost or copied'),
    ("status", _clusters, 'Clusters and their runs, as their cloud has them: every row is what the cloud'),
    ("extend", _clusters, "Move an Azure cluster's expiry later: its azbench-expires tags, which the"),
    ("ssh", _clusters, "A shell (or one command) on the cluster's head node, trusting only its pinned"),
    ("sweep", _clusters, 'Delete your Azure clusters whose azbench-expires tag has passed (--all-owners:'),
    ("run", _run, 'Run a recipe at one or more node counts, watch it, then ingest its results.'),
    ("logs", _run, "Print a run's training log (fetched copy, or live from the cluster while it"),
    ("prepare", _recipes, 'Stage a recipe on the cluster as one batch job: verify its licence-gated weights'),
    ("report", _report, 'MLPerf scores as MLCommons publishes them, best per benchmark, cost, MFU;'),
    ("health", _health, 'Per-node checks, group collectives and a throughput probe; drain the nodes'),
    ("resize", _resize, "Grow (within the provider's quota; Azure starts the VMs a shrink parked, then"),
    ("plan", _plan, 'Predicted time-to-train (with an 80% interval), cost per result, cost per'),
    ("goodput", _goodput, "Where the time went: a run's wall time (or a cluster's life) split into categories,"),
    ("explain", _explain, 'The predicted step, part by part (compute, tp/cp/ep comm, pp bubble and p2p,'),
    ("compare", _pipeline, 'Compare stored results (default: the newest sweep) with a baseline; exit 8'),
    ("recipes", _recipes, 'List and inspect benchmark recipes.'),
    ("results", _results, 'Stored results: list, show, import MLPerf logs.'),
    ("fabric", _fabric, 'What the network did: run collectives as a benchmark, read what others ran.'),
    ("pipeline", _pipeline, 'Scheduled benchmark pipelines: up, runs, report, compare, down.'),
    ("baseline", _pipeline, 'Performance baselines to compare runs against.'),
)
LAZY.update((name, Unloaded(name, sentence, load)) for name, load, sentence in _COMMANDS)


# ---------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; AzbenchError -> one line on stderr + its exit code.

    Every way out is one stderr line and a code in errors.EXIT_CODES: usage errors (2), a closed
    stdout (2), a full disk (6, anywhere), Ctrl-C ("interrupted", 130)."""
    if _stdout_closed():
        _say("usage error: standard output is closed: nothing could be printed "
             "(redirect it to a file or /dev/null instead)")
        sys.exit(2)
    _quiet_sdk_loggers(argv if argv is not None else sys.argv[1:])
    try:
        code = app(args=argv, prog_name="azbench", standalone_mode=False)
        # Without standalone mode, typer returns a typer.Exit's code instead of exiting. Typer
        # turns Ctrl-C (KeyboardInterrupt) into Exit(130) before this handler could see it.
        if code == EXIT_INTERRUPTED:
            _say("interrupted")
        if isinstance(code, int) and code:
            sys.exit(code)
    except MissingExtra as exc:
        if _STATE["debug"]:
            raise
        _say_missing(exc, argv if argv is not None else sys.argv[1:])
    except AzbenchError as exc:
        if _STATE["debug"]:
            raise
        _say(f"{exc.kind}: {exc}")
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: bad flag, missing argument
        _usage_error(exc)
    except typer.Abort:
        sys.stderr.write("azbench: aborted\n")
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        _os_error(exc)
    except ModuleNotFoundError as exc:  # an extra's SDK that no boundary checked first
        from orchestrator.backends import missing_extra  # lazy: +pydantic, +0.05 s on --help; the error path only
        found = None if _STATE["debug"] else missing_extra(exc)
        if found is None:
            _internal_error(exc)
        _say_missing(found, argv if argv is not None else sys.argv[1:])
    except Exception as exc:  # a bug: keep it to one line unless --debug
        _internal_error(exc)
    sys.exit(0)


def _say_missing(exc: MissingExtra, argv: list[str]) -> NoReturn:
    """`azbench up --provider azure needs the Azure SDKs: pip install 'azbench[azure]'`, exit 7:
    the command as typed (its subcommand words, and the flag that chose the backend when the
    user typed it), then what it needs."""
    words = ["azbench"]
    command = typer.main.get_command(app)
    for token in argv:
        if (not isinstance(command, typer.core.TyperGroup) or token.startswith("-")
                or token not in command.commands):
            break
        found = command.get_command(typer.Context(command), token)  # the root's: loaded by now
        if found is None:
            break
        command = found
        words.append(token)
    flag, _, value = exc.subject.partition(" ")
    typed = flag.startswith("-") and (any(a == flag for a in argv)
                                      or any(a.startswith(flag + "=") for a in argv))
    if typed:
        line = f"{' '.join(words)} {exc.subject} {exc.needs}"
    elif exc.subject:  # the backend came from a spec or a stored cluster
        line = f"{' '.join(words)} (provider {value or exc.subject}) {exc.needs}"
    else:
        line = f"{' '.join(words)} {exc.needs}"
    _say(line, prefix="")
    sys.exit(exc.exit_code)


def _usage_error(exc: typer.TyperException) -> NoReturn:
    """A bad flag or a missing argument: one line naming the command's help; a group called
    with no command (`azbench results`) shows the group's help."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        show = getattr(exc, "show", None)
        show() if show else None
    else:
        ctx = getattr(exc, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _say(f"usage error: {' '.join(exc.format_message().split())}{where}")
    sys.exit(getattr(exc, "exit_code", 2))


def _os_error(exc: OSError) -> NoReturn:
    """A full disk (wherever it was met) is a store error; a closed stdout a usage error; any
    other OSError about a named path (a read-only folder given to `report --html`, `init`...) is
    one line naming the path: exit 6 under $AZBENCH_HOME (the store's), else 2 (a path the user
    named)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        _say(f"{StoreError.kind}: no space left on device"
             f"{f' writing {exc.filename}' if exc.filename else ''}")
        sys.exit(StoreError.exit_code)
    if exc.errno == errno.EBADF and _stdout_closed():
        _say("usage error: standard output is closed: nothing could be printed")
        sys.exit(2)
    if exc.filename:
        path = Path(str(exc.filename))
        ours = path.is_relative_to(home()) if path.is_absolute() else False
        kind = StoreError if ours else ConfigError
        _say(f"{kind.kind}: {path}: {exc.strerror or type(exc).__name__}")
        sys.exit(kind.exit_code)
    _internal_error(exc)


def _internal_error(exc: Exception) -> NoReturn:
    """A bug: one line, exit 1; the traceback with --debug."""
    if _STATE["debug"]:
        raise exc
    _say(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)")
    sys.exit(1)


def _quiet_sdk_loggers(argv: list[str]) -> None:
    """The Azure SDK logs its credential chain's failures as WARNINGs, which Python's last-resort
    handler prints to stderr (a dozen lines before azbench's one). Errors reach the user through
    azbench's own line; --debug or AZBENCH_DEBUG keeps the SDK's log."""
    import logging
    import os
    if "--debug" not in argv and not os.environ.get("AZBENCH_DEBUG"):
        logging.getLogger("azure").setLevel(logging.ERROR + 10)


def _say(line: str, prefix: str = "azbench: ") -> None:
    """One line on stderr, if there is a stderr to write to: query strings (SAS tokens)
    redacted, control characters stripped (a name from a log may be in it)."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(f"{prefix}{shown(line)}\n")
            sys.stderr.flush()
    except OSError:
        pass


def _stdout_closed() -> bool:
    """True when fd 1 was closed (`azbench ... >&-`): Python then has no sys.stdout at all."""
    import os
    if sys.stdout is None:
        return True
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # a StringIO in tests: open unless closed
        return sys.stdout.closed
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False
