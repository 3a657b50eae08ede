"""Run the real `azbench` CLI in a subprocess and capture what a user would see."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def azbench(*args: str, home: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 300, cwd: Path | None = None) -> CliResult:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AZBENCH_DEBUG", None)
    if home is not None:
        full_env["AZBENCH_HOME"] = str(home)
    # stdin is never a terminal here, as in CI: commands that ask must refuse or take --yes.
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                          stdin=subprocess.DEVNULL,
                          text=True, env=full_env, timeout=timeout, cwd=cwd)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def one_line_error(result: CliResult) -> str:
    """The stderr of a failed command, asserted to be exactly one line with no traceback."""
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert "Traceback" not in result.err, result.err
    assert len(lines) == 1, result.err
    return lines[0]


def azbench_in_process(*args: str, home: Path, cwd: Path | None = None,
                       env: dict[str, str] | None = None) -> CliResult:
    """The CLI's `main` run in this process (no interpreter start-up: ~100x faster than
    `azbench`), with its own AZBENCH_HOME, stdin that is not a terminal, captured stdout and
    stderr, and the exit code `main` passes to sys.exit. For tables of many cases; keep
    subprocess `azbench` for what only a real process shows (signals, closed descriptors)."""
    import contextlib
    import io

    from orchestrator.cli.app import main
    from orchestrator.cli.common import _STATE
    saved_env = dict(os.environ)
    saved = (sys.stdin, sys.stdout, sys.stderr)
    out, err = io.StringIO(), io.StringIO()
    old_cwd = Path.cwd()
    code: int | str | None = 0
    try:
        os.environ.pop("AZBENCH_DEBUG", None)
        os.environ.update({"AZBENCH_HOME": str(home), **(env or {})})
        os.environ.pop("AZBENCH_DB_URL", None)
        _STATE["debug"] = False
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
        with contextlib.suppress(SystemExit):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code
                raise
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return CliResult(code if isinstance(code, int) else 1, out.getvalue(), err.getvalue())


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """`azbench ARGS` in this process, through main (its SystemExit taken): (exit code, stdout,
    stderr) as capsys caught them."""
    import pytest

    from orchestrator.cli.app import main
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_.value.code or 0), out.out, out.err
