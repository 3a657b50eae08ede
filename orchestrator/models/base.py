"""The shared base of the typed values: UTC time, who runs azbench here, and the frozen model."""

from __future__ import annotations

import getpass
import os
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def local_owner() -> str:
    """Who runs azbench here, for the owner of what it records where no cloud principal is
    known: $AZBENCH_OWNER (a team's chosen name), else $USER, else the login name."""
    for name in ("AZBENCH_OWNER", "USER"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "unknown"


def parse_utc(text: object) -> datetime | None:
    """An ISO 8601 time (a trailing Z allowed; naive means UTC), or None when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
