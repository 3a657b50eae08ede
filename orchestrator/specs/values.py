"""The values specs are built from: durations, bounded numbers whose message names both bounds,
node counts, free-form parameters, and the one loader (YAML with line numbers, flags on top).

Unknown keys are errors (extra="forbid") reported as `file:line: unknown key 'x'`; flags
override the file, and a bad flag value is reported against the flag.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, StrictInt, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.yamlio import LineMap, load_yaml, validation_error_to_config_error

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
M = TypeVar("M", bound=BaseModel)


def parse_duration(value: object) -> int:
    """Seconds from an int or a string like '90s', '30m', '2h', '1d'; finite, or ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30m")
    if isinstance(value, (int, float)):
        number, unit = float(value) if isinstance(value, float) else value, "s"
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{str(value)[:40]!r} is not a duration (use e.g. 90s, 30m, 2h)")
        number, unit = float(match.group(1)), match.group(2) or "s"
    seconds = number * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{str(value)[:40]!r} is not a finite duration")
    return int(seconds)


def fmt_bound(value: float) -> str:
    """A bound or value for a message: 168, 0.25, 1e+300, inf (never an OverflowError)."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value) if abs(value) < 10**15 else f"{value:.3e}" if abs(value) < 10**300 else "a huge number"
        return text
    return f"{value:g}"


def between(lo: float, hi: float, unit: str = "") -> AfterValidator:
    """A pydantic check that a number is finite and lo <= value <= hi, saying both bounds:
    `expires_hours: must be between 0.25 and 168, got inf` (ConfigError adds file:line)."""
    def check(value: Any) -> Any:
        finite = not isinstance(value, float) or math.isfinite(value)
        if not (finite and lo <= value <= hi):
            raise ValueError(f"must be between {fmt_bound(lo)} and {fmt_bound(hi)}{unit}, got {fmt_bound(value)}")
        return value
    return AfterValidator(check)


# The bounds every number a user writes is held to (README "Limits").
MAX_NODES = 100_000
WEEK_S = 7 * 24 * 3600
NodeCount = Annotated[StrictInt, between(1, MAX_NODES)]
Seconds = Annotated[int, between(1, 30 * 24 * 3600, " seconds")]


def _finite_params(value: dict[str, object]) -> dict[str, object]:
    for key, item in value.items():
        if not key:
            raise ValueError("a parameter needs a name")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{key} must be a finite number, got {item}")
    return value


Params = Annotated[dict[str, str | int | float | bool], AfterValidator(_finite_params)]


def load_spec(model: type[M], path: Path | None, overrides: Mapping[str, object] | None) -> M:
    """`model` from a YAML file (optional) with CLI flag values layered on top; ConfigError
    naming file:line, or the flag, of the first bad value."""
    data: dict[str, object] = {}
    lines: LineMap = {}
    if path is not None:
        loaded, lines = load_yaml(path)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}:1: expected a mapping of keys at the top level")
        data = loaded
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    merged = {**data, **flags}
    try:
        return model.model_validate(merged)
    except ConfigError as exc:  # raised by lookups inside validators
        raise exc from None
    except ValidationError as exc:
        loc = exc.errors()[0].get("loc", ())
        if loc and loc[0] in flags:
            raise _flag_error(exc, str(loc[0])) from None
        raise validation_error_to_config_error(exc, str(path or "spec"), lines) from None


def _flag_error(exc: ValidationError, flag: str) -> ConfigError:
    msg = exc.errors()[0].get("msg", "invalid value").removeprefix("Value error, ")
    msg = " ".join(msg.split())
    return ConfigError(f"--{flag.replace('_', '-')}: {msg}")
