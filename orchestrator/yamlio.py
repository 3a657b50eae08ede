"""YAML loading that remembers where every key was, so errors can say `file:line`.

The one loader for every spec file (cluster, run, pipeline, recipe). It is bounded in time and
memory whatever the input:

- regular files only (a FIFO or /dev/zero is refused from its `stat`, before any read), and at
  most MAX_BYTES of them;
- one parse: the composer's node graph gives both the data and the line map;
- nesting deeper than MAX_DEPTH is an error (not a RecursionError);
- aliases are counted as the composer builds the graph: each node's expanded size (the number
  of values it stands for once every alias is followed) is summed from its children's, which are
  already known, so an alias bomb is refused in O(size of the file) when the document would
  expand past MAX_NODES values; an alias inside its own anchor is refused too;
- a key given twice in one mapping is an error naming both lines (the last one no longer wins
  quietly).

`load_yaml(path)` returns the data plus a map from key paths to line numbers;
`validation_error_to_config_error` turns a pydantic ValidationError into one ConfigError line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import ValidationError

from orchestrator.errors import ConfigError

Loc = tuple[str | int | float, ...]  # a path into a document: keys (YAML allows numbers) and list indexes
LineMap = dict[Loc, int]

MAX_BYTES = 1 << 20  # 1 MiB: specs are a few KiB; a recipe is the largest at ~10 KiB
MAX_DEPTH = 64  # mappings/sequences inside each other
MAX_NODES = 20_000  # values in the document once every alias is expanded (a recipe has ~300)

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _LimitError(yaml.MarkedYAMLError):
    """A bound this loader enforces, raised at the mark where it was crossed."""


class _Bounds(yaml.composer.Composer):
    """A composer that enforces MAX_DEPTH, MAX_NODES and unique keys as it builds the graph."""

    check_event: Callable[..., bool]  # from the parser this is mixed with
    peek_event: Callable[[], Any]

    def _start_bounds(self) -> None:
        self._depth = 0
        self._composed = 0  # nodes built so far (aliases not counted): stops a long flat list early
        self._sizes: dict[int, int] = {}  # id(node) -> expanded size, once the node is complete

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:  # its anchor is still being composed
                raise _LimitError("while composing", None,
                                  f"alias *{event.anchor} refers to a value that contains it",
                                  event.start_mark)
            return node
        self._depth += 1
        self._composed += 1
        if self._composed > MAX_NODES:
            raise _LimitError(None, None, f"has more than {MAX_NODES:,} values: refusing it",
                              self.peek_event().start_mark)
        if self._depth > MAX_DEPTH:
            raise _LimitError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                              self.peek_event().start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node)
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        assert node is not None  # the parser had an event for it
        size = 1 + sum(self._sizes.get(id(c), 1) for c in children)
        if size > MAX_NODES:
            raise _LimitError(None, None, f"expands to more than {MAX_NODES:,} values "
                              "(aliases included): refusing it", node.start_mark)
        self._sizes[id(node)] = size
        return node

    @staticmethod
    def _check_keys(node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = (key_node.tag, key_node.value)
            line = key_node.start_mark.line + 1 if key_node.start_mark else 0
            if key in seen:
                raise _LimitError(None, None, f"duplicate key '{key_node.value}' "
                                  f"(first given on line {seen[key]})", key_node.start_mark)
            seen[key] = line


class _PyLoader(_Bounds, yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        yaml.SafeLoader.__init__(self, stream)
        self._start_bounds()


_Loader: Any = _PyLoader
try:  # libyaml's event parser when PyYAML has it (10x faster); the composer stays ours
    from yaml._yaml import CParser

    class _CLoader(_Bounds, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._start_bounds()

    _Loader = _CLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    pass


def load_yaml(path: Path) -> tuple[Any, LineMap]:
    """Parse `path`; ConfigError with file:line on an unreadable, oversized or malformed file."""
    return parse_yaml(read_spec_text(path), str(path))


def read_spec_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The text of a regular file of at most `limit` bytes; ConfigError otherwise.

    The type is checked from `stat` before opening (opening a FIFO blocks), and again on the open
    descriptor; the read stops at limit + 1 bytes whatever the size claims."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ConfigError(f"{path}: is {what}: a spec must be a regular file")
    if st.st_size > limit:
        raise ConfigError(f"{path}: {st.st_size:,} bytes is over the {_size(limit)} limit for a spec file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"{path}: is not a regular file: a spec must be a regular file")
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise ConfigError(f"{path}: over the {_size(limit)} limit for a spec file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


def parse_yaml(text: str, source: str) -> tuple[Any, LineMap]:
    """One parse of `text` into (data, line map), within the bounds above."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: over the {_size(MAX_BYTES)} limit for a spec file")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        if context and problem.startswith("but "):  # "but found another document": say what
            problem = f"{context} {problem}"
        kind = "" if isinstance(exc, _LimitError) else "malformed YAML: "
        raise ConfigError(f"{where}: {kind}{problem}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an int of 5,000 digits
        raise ConfigError(f"{source}: unusable value: {str(exc).splitlines()[0].split(';')[0]}") from None
    finally:
        loader.dispose()
    lines: LineMap = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def _walk(node: yaml.Node, path: Loc, lines: LineMap) -> None:
    """Key paths -> lines. Bounded: the composer refused documents over MAX_NODES expanded
    values and deeper than MAX_DEPTH, so this visits at most MAX_NODES paths."""
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key, (str, int, float, bool)):
                continue  # a complex key (a list or mapping): no path names it
            _walk(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


# At most this many problems are named in one error line; the rest are counted.
MAX_PROBLEMS = 10


def validation_error_to_config_error(
    exc: ValidationError, source: str, lines: LineMap | None = None
) -> ConfigError:
    """Every validation problem, in file order, each as `source:line: key: message`, on one
    line separated by "; " (at most MAX_PROBLEMS named, the rest counted)."""
    found = []
    for err in exc.errors():
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
        found.append((line or 0, f"{where}: {' '.join(message.split())}"))  # one line, whatever a value held
    problems = list(dict.fromkeys(text for _, text in sorted(found, key=lambda f: f[0])))
    more = len(problems) - MAX_PROBLEMS
    suffix = f"; and {more} more problem{'s' if more > 1 else ''}" if more > 0 else ""
    return ConfigError("; ".join(problems[:MAX_PROBLEMS]) + suffix)


def _line_for(loc: Loc, lines: LineMap) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _clean(msg: str) -> str:
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
