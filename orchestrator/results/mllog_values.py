"""Lenient value coercion for MLLOG fields (ints logged as floats or strings, JSON bodies)."""

from __future__ import annotations

import json
from typing import Any


def as_int(v: Any) -> int | None:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def json_dict(text: str) -> dict[str, Any] | None:
    try:
        return obj if isinstance(obj := json.loads(text), dict) else None
    except ValueError:
        return None
