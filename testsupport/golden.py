"""Golden files: the one check that a generated text (a batch script, slurm.conf, cloud-init, a
REST body) is exactly the reviewed copy under tests/golden/.

A golden is rewritten only when AZBENCH_UPDATE_GOLDEN=1 is set (then review the diff before
committing it). Otherwise a missing or different golden fails with a unified diff and the file
is left as it was.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

UPDATE_ENV = "AZBENCH_UPDATE_GOLDEN"
_MAX_DIFF_LINES = 80


def check_golden(path: Path, text: str) -> None:
    """Assert that `text` equals the golden file at `path` (rewrite it under UPDATE_ENV=1)."""
    path = Path(path)
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return
    if not path.is_file():
        raise AssertionError(f"missing golden file {path} (create it with {UPDATE_ENV}=1)")
    expected = path.read_text()
    if text != expected:
        diff = list(difflib.unified_diff(expected.splitlines(keepends=True), text.splitlines(keepends=True),
                                         fromfile=f"{path} (golden)", tofile="rendered now"))
        shown = "".join(diff[:_MAX_DIFF_LINES]) + (f"... {len(diff) - _MAX_DIFF_LINES} more diff lines\n"
                                                  if len(diff) > _MAX_DIFF_LINES else "")
        raise AssertionError(f"{path.name} differs from its golden file (rerun with {UPDATE_ENV}=1 if "
                             f"intended, and review the diff):\n{shown}")
