"""The one Jinja environment azbench renders its generated scripts with (batch scripts, slurm.conf,
cloud-init, health jobs, container launches).

Strict: an undefined name is an error, never an empty string. Blocks trim their own line and
leading space and the trailing newline is kept. Only `*.html.j2` templates (the report site,
templates/report/) are HTML-escaped; everything else is shell, config and YAML text, never
escaped. The `q` filter shlex-quotes a value for a shell line; `exports` writes a
mapping as `export KEY=value` lines (seams.env_exports: names checked, values quoted).
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from pathlib import Path

import jinja2

from orchestrator.paths import templates_dir as shipped_templates
from orchestrator.seams import env_exports


def render(name: str, templates_dir: Path | None = None, **ctx: object) -> str:
    """Template `name` (from `templates_dir`, default the shipped templates/) rendered with `ctx`."""
    return environment(templates_dir).get_template(name).render(**ctx)


def environment(templates_dir: Path | None = None) -> jinja2.Environment:
    """The environment for a templates folder, built once per folder (templates reload when
    their file changes)."""
    return _environment(str(Path(templates_dir or shipped_templates()).resolve()))


@lru_cache(maxsize=8)
def _environment(folder: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False,
                                            default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = _quote
    env.filters["exports"] = _export_lines
    return env


def _quote(value: object) -> str:
    return shlex.quote(str(value))


def _export_lines(env: dict[str, object]) -> str:
    return env_exports(env, end="\n")
