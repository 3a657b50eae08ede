"""A log's excerpt on a system page of the report site: its first and last lines, long lines
cut, read from the file without loading a large log whole; None when the log is not here."""

from __future__ import annotations

from pathlib import Path

EXCERPT_LINES = 15  # head and tail of a log shown under a run
EXCERPT_LINE_CHARS = 240


def log_excerpt(path: str | None, lines: int = EXCERPT_LINES) -> str | None:
    """The first and last `lines` lines of a log (long lines cut), None when it is not here."""
    if not path:
        return None
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            head = fh.read(32 * 1024)
            tail = b""
            if size > len(head):  # the end, when the head did not reach it
                fh.seek(max(len(head), size - 32 * 1024))
                tail = fh.read()
    except OSError:
        return None
    cut = [ln[:EXCERPT_LINE_CHARS] for ln in head.decode("utf-8", "replace").splitlines()]
    if not tail:
        if len(cut) <= 2 * lines:
            return "\n".join(cut)
        return "\n".join(cut[:lines] + ["…"] + cut[-lines:])
    end = [ln[:EXCERPT_LINE_CHARS] for ln in tail.decode("utf-8", "replace").splitlines()[1:]]
    return "\n".join(cut[:lines] + [f"… ({size:,} bytes in all) …"] + end[-lines:])
