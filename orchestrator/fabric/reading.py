"""One pass over an nccl-tests output or an NCCL log, wherever it enters (`fabric inspect`,
`results import`, `fabric test`'s job output): every line is fed to both parsers (nccltests and
nccl_log) once, and the bytes are hashed on the way (the stored row's identity).

Bounded (issue 48): a file whose first block holds a NUL byte is not text and is refused after
that block, without reading the rest; a line is read at most LINE_MAX bytes at a time (the rest of
a longer line is read past, counted, never held); a number over nccltests.MAX_DIGITS characters is
refused with the file and line. Memory stays flat in the file's size: the parsers keep only what
a report shows.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from orchestrator.errors import ConfigError
from orchestrator.fabric.nccl_log import LogParser, NcclTransport
from orchestrator.fabric.nccltests import NcclRun, Parser
from orchestrator.results.files import open_regular

FIRST_BLOCK = 1 << 16  # bytes looked at for NUL before anything is parsed
LINE_MAX = 8192  # bytes of one line kept: nccl-tests and NCCL print lines of a few hundred
FILE_LIMIT = 4 << 30  # bytes: a file over this is refused before reading (a 16k-rank INFO log is < 1 GiB)


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


@dataclass
class Reading:
    """What one pass over an output read: its runs, NCCL's facts, the sha256 of its bytes."""

    name: str
    runs: list[NcclRun]
    log: NcclTransport
    sha256: str
    lines: int = 0
    cut_lines: int = 0
    notes: list[str] = field(default_factory=list)


def _lines(handle: BinaryIO, name: str, digest: _Digest) -> Iterator[tuple[bytes, bool]]:
    """Lines of `handle` (at most LINE_MAX bytes each; the rest of a longer one is read past and
    hashed, and the line yielded cut), refusing a first block with a NUL byte."""
    first = handle.read(FIRST_BLOCK)
    if (at := first.find(b"\0")) >= 0:
        raise ConfigError(f"{name}: not a text file (a NUL byte at offset {at} of its first "
                          f"{FIRST_BLOCK // 1024} KiB): nothing past that block was read")
    digest.update(first)
    stream = io.BufferedReader(_Chain(first, handle, digest), buffer_size=1 << 16)
    while True:
        line = stream.readline(LINE_MAX + 1)
        if not line:
            return
        if len(line) > LINE_MAX and not line.endswith(b"\n"):
            while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass
            yield line[:LINE_MAX], True
            continue
        yield line, False


class _Chain(io.RawIOBase):
    """The first block already read, then the rest of the handle (hashed as it is read)."""

    def __init__(self, first: bytes, handle: BinaryIO, digest: _Digest) -> None:
        self._first, self._handle, self._digest = memoryview(first), handle, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: "bytearray | memoryview") -> int:  # type: ignore[override]
        if self._first.nbytes:
            n = min(len(buffer), self._first.nbytes)
            buffer[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        data = self._handle.read(len(buffer))
        self._digest.update(data)
        buffer[:len(data)] = data
        return len(data)


def read_stream(handle: BinaryIO, name: str, name_hint: str | None = None) -> Reading:
    """One pass over `handle`: both parsers fed line by line. ConfigError names `name`."""
    digest = hashlib.sha256()
    runs, log = Parser(name_hint), LogParser()
    count = cut = 0
    try:
        for raw, was_cut in _lines(handle, name, digest):
            count += 1
            cut += was_cut
            line = raw.decode("utf-8", errors="replace")
            runs.feed(line, count)
            log.feed(line)
    except ConfigError as exc:
        message = exc.message if exc.message.startswith(f"{name}:") else f"{name}: {exc.message}"
        raise ConfigError(message) from None
    notes = [f"{cut} line(s) over {LINE_MAX} bytes read only up to that length"] if cut else []
    return Reading(name=name, runs=runs.runs(), log=log.result(), sha256=digest.hexdigest(), lines=count,
                   cut_lines=cut, notes=notes)


def read_file(path: Path, name_hint: str | None = None) -> Reading:
    """One pass over the regular file `path` (refused when over FILE_LIMIT bytes)."""
    with open_regular(path, "fabric output") as handle:
        size = _size(handle)
        if size > FILE_LIMIT:
            raise ConfigError(f"{path}: {size} bytes, over the {FILE_LIMIT >> 30} GiB a fabric output may be: not read")
        return read_stream(handle, str(path), name_hint if name_hint is not None else path.name)


def read_bytes(data: bytes, name: str, name_hint: str | None = None) -> Reading:
    return read_stream(io.BytesIO(data), name, name_hint)


def read_text(text: str, name: str, name_hint: str | None = None) -> Reading:
    return read_bytes(text.encode("utf-8", errors="replace"), name, name_hint)


def _size(handle: BinaryIO) -> int:
    return os.fstat(handle.fileno()).st_size
