"""The one Jinja environment azbench renders its generated scripts with (batch scripts, slurm.conf,
cloud-init, health jobs, container launches).

Strict: an undefined name is an error, never an empty string. Blocks trim their own line and
leading space and the trailing newline is kept. Only `*.html.j2` templates (the report site,
templates/report/) are HTML-escaped.

No value reaches a shell unquoted. In a shell template (`*.sh.j2`, `*.sbatch.j2`) every `{{ }}`
passes through one filter, `q` (shlex quoting), whether the template names it or not: a value
that needs no quotes prints as written, any other is quoted. Output that is already shell is
marked by the filter that made it: `q`, `exports` (`export KEY=value` lines, names checked,
values quoted), `heredoc` (a file's text inside a quoted here-document, checked not to contain
its delimiter), `script` (a command azbench built from quoted parts, such as a recipe's
launch command) and `prose` (a value in a comment line, shown unquoted: it can hold no line
break, so the comment cannot end early). No value in any template may hold a line break, NUL
or other control character unless one of those filters placed it: a comment line
(`# {{ why }}`), a batch directive line, a slurm.conf line or a YAML scalar can never gain a
line from a value. A value that breaks the rule is a ConfigError naming the template.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path

import jinja2

from orchestrator.errors import ConfigError
from orchestrator.paths import templates_dir as shipped_templates
from orchestrator.safetext import clean_lines
from orchestrator.seams import env_exports

# A line break, NUL or other C0/C1 control (tab allowed: it cannot end a line).
_BREAKS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_SHELL_SUFFIXES = (".sh.j2", ".sbatch.j2")


class Shell(str):
    """Text a filter made ready for its place in a script (quoted, or built from quoted parts)."""


class Block(str):
    """A multi-line block a template places on purpose (a file's text, an indented document)."""


def render(name: str, templates_dir: Path | None = None, **ctx: object) -> str:
    """Template `name` (from `templates_dir`, default the shipped templates/) rendered with `ctx`;
    ConfigError for a value the template may not hold (see the module's rule)."""
    try:
        return environment(templates_dir, name).get_template(name).render(**ctx)
    except UnsafeValue as e:
        raise ConfigError(f"{name}: {e}") from None


def environment(templates_dir: Path | None = None, name: str = "") -> jinja2.Environment:
    """The environment for a templates folder and the kind of template `name` is (shell or
    other), built once per folder and kind (templates reload when their file changes)."""
    return _environment(str(Path(templates_dir or shipped_templates()).resolve()), _kind(name))


def is_shell(name: str) -> bool:
    """Whether template `name` is a shell script (its values are quoted by default)."""
    return name.endswith(_SHELL_SUFFIXES)


def _kind(name: str) -> str:
    return "shell" if is_shell(name) else "html" if name.endswith(".html.j2") else "text"


def build_environment(folder: str, shell: bool | str,
                      undefined: type[jinja2.Undefined] = jinja2.StrictUndefined) -> jinja2.Environment:
    """A fresh environment with azbench's filters and rules for a kind of template: "shell",
    "text" (True and False name these two) or "html" (tests pass their own `undefined`)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=undefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False,
                                            default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_FINALIZE[_kind_of(shell)],
    )
    env.filters["q"] = quote
    env.filters["exports"] = _export_lines
    env.filters["heredoc"] = _heredoc
    env.filters["script"] = _script
    env.filters["block"] = _block
    env.filters["prose"] = _prose
    return env


@lru_cache(maxsize=16)
def _environment(folder: str, kind: str) -> jinja2.Environment:
    return build_environment(folder, kind)


def _kind_of(shell: bool | str) -> str:
    return shell if isinstance(shell, str) else "shell" if shell else "text"


class UnsafeValue(ValueError):
    """A value a template may not hold where it is placed."""


def quote(value: object) -> Shell:
    """`value` as one shell word (shlex quoting); NUL refused (no shell can hold it)."""
    text = str(value)
    if "\x00" in text:
        raise UnsafeValue(f"a value holds a NUL byte: {text[:40]!r}")
    return Shell(shlex.quote(text))


def _checked(value: object) -> str:
    text = str(value)
    if _BREAKS.search(text):
        raise UnsafeValue(f"a value holds a line break or control character: {text[:60]!r}")
    return text


def _finalize_shell(value: object) -> object:
    if isinstance(value, (Shell, Block)):
        return value
    return quote(_checked(value))


def _finalize_text(value: object) -> object:
    if isinstance(value, (Shell, Block)) or hasattr(value, "__html__"):
        return value
    return _checked(value)


def _finalize_html(value: object) -> object:
    """A page's text value without control, bidi or zero-width characters (newlines kept): Jinja's
    autoescape makes `<` and `&` inert but keeps a raw ESC from a folder's or a log's name, which
    a terminal `cat` or a copied line would still obey. Markup the code built is left whole."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return clean_lines(value)
    return value


# HTML pages are escaped by Jinja's autoescape (a page may hold multi-line text), after _finalize_html.
_FINALIZE = {"shell": _finalize_shell, "text": _finalize_text, "html": _finalize_html}


def _export_lines(env: dict[str, object]) -> Shell:
    return Shell(env_exports(env, end="\n"))


def _heredoc(text: object, delimiter: str) -> Shell:
    """`text` ending in a newline, for a here-document opened with <<'`delimiter`'; refused when a
    line of it is the delimiter (the rest would run as commands) or it holds a NUL."""
    body = str(text)
    if "\x00" in body:
        raise UnsafeValue("a here-document's text holds a NUL byte")
    if not body.endswith("\n"):
        body += "\n"
    if delimiter in body.splitlines():
        raise UnsafeValue(f"a here-document's text contains its delimiter {delimiter}")
    return Shell(body)


def _script(text: object) -> Shell:
    """Shell code azbench built itself with every substituted value quoted (recipes' launch
    commands); NUL refused."""
    body = str(text)
    if "\x00" in body:
        raise UnsafeValue("a command holds a NUL byte")
    return Shell(body)


def _prose(value: object) -> Shell:
    """A value for a comment line (`# {{ why | prose }}`), unquoted for the reader: it holds no line
    break or control character, so the comment cannot end early and nothing after it runs."""
    return Shell(_checked(value))


def _block(text: object) -> Block:
    """A multi-line block placed on purpose (an indented file in cloud-init); NUL and controls
    other than newline refused."""
    body = str(text)
    if re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", body.replace("\r\n", "\n")):
        raise UnsafeValue("a block holds a control character")
    return Block(body)
