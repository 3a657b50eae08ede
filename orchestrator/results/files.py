"""Opening the files an import reads: regular files only, never blocking, never unbounded.

A `result_1.txt` that is a FIFO would block `open()` until a writer came (forever), and one that
links to /dev/zero would read forever. So every input file is opened with O_NONBLOCK (opening a
FIFO then returns at once) and checked with fstat on the open descriptor (no race between the
check and the read): anything but a regular file is a ConfigError that names what it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from orchestrator.errors import ConfigError, NotFoundError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a FIFO', 'a character device', ... for a non-regular st_mode."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: Path, what: str) -> None:
    """Raise ConfigError unless `path` (links followed) is a regular file; NotFoundError if absent."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        broken = os.path.islink(path)
        raise NotFoundError(f"{what} {path} {'is a broken link' if broken else 'does not exist'}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{what} {path} is {kind_of(mode)}, not a regular file")


def open_regular(path: Path, what: str = "file") -> BinaryIO:
    """Open `path` for binary reading if it is a regular file (links followed).

    Raises NotFoundError (missing) or ConfigError (a FIFO, a device, a directory, unreadable),
    each one line naming the path.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise NotFoundError(f"{what} {path} does not exist") from None
    except OSError as exc:  # a socket (ENXIO), no permission, a loop of links
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{what} {path} is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small(path: Path, limit: int, what: str = "file") -> bytes:
    """The whole of a small regular file; ConfigError if it is over `limit` bytes."""
    with open_regular(path, what) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{what} {path} is over {limit} bytes: not read")
    return data
