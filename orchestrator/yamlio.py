"""YAML loading that remembers where every key was, so errors can say `file:line`.

`load_yaml(path)` returns the data plus a map from key paths to line numbers;
`validation_error_to_config_error` turns a pydantic ValidationError into one ConfigError line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from orchestrator.errors import ConfigError

LineMap = dict[tuple[Any, ...], int]


def load_yaml(path: Path) -> tuple[Any, LineMap]:
    """Parse `path`; ConfigError with file:line on unreadable or malformed YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> tuple[Any, LineMap]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML: {problem}") from None
    lines: LineMap = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def _walk(node: yaml.Node, path: tuple[Any, ...], lines: LineMap) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[(*path, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


def validation_error_to_config_error(
    exc: ValidationError, source: str, lines: LineMap | None = None
) -> ConfigError:
    """The first validation problem as `source:line: key: message`."""
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    line = _line_for(loc, lines or {})
    where = f"{source}:{line}" if line else source
    key = ".".join(str(p) for p in loc) or "(top level)"
    if err.get("type") == "extra_forbidden":
        message = f"unknown key '{key}'"
    elif not loc:
        message = _clean(err.get("msg", "invalid value"))
    else:
        message = f"{key}: {_clean(err.get('msg', 'invalid value'))}"
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
    return ConfigError(f"{where}: {message}{suffix}")


def _line_for(loc: tuple[Any, ...], lines: LineMap) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _clean(msg: str) -> str:
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
