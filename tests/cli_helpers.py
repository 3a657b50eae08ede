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
