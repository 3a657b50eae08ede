"""No value reaches a shell unquoted (issue 48, point 6): every shipped template is rendered with
every value it reads (names, paths, comments' text, loop items, mapping values) replaced by one
hostile string; the script must pass `bash -n`, and each place the hostile text lands must be
inside single quotes, a comment line it cannot end, or a quoted here-document. A value with a
line break is refused, or lands only inside single quotes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import jinja2
import pytest
import yaml

from orchestrator.errors import ConfigError
from orchestrator.paths import templates_dir
from orchestrator.templating import Shell, UnsafeValue, build_environment, is_shell, render

HOSTILE = 'Z9 $(touch /tmp/azbench-pwned) `id`; rm -rf x | y & "q" <z> * \\ {a,b} ~ !! #'
QUOTE_BREAKER = "a'b;touch /tmp/azbench-pwned;'"
TEMPLATES = sorted(p.name for p in templates_dir().glob("*.j2"))
SHELL_TEMPLATES = [t for t in TEMPLATES if is_shell(t)]
OTHER_TEMPLATES = [t for t in TEMPLATES if not is_shell(t)]


def _hostile_class(text: str) -> type[jinja2.Undefined]:
    class Hostile(jinja2.Undefined):
        """Whatever the template reads is `text`: attributes, items, loop items (two each),
        mapping pairs, numbers in arithmetic, comparisons and truth tests (true, so most
        branches render)."""

        def __str__(self) -> str:
            return text

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return self

        def __getitem__(self, key: object) -> Any:
            return self

        def __iter__(self) -> Iterator[Any]:
            return iter([self, self, self])

        def __len__(self) -> int:
            return 3

        def __gt__(self, *args: Any, **kwargs: Any) -> Any:
            return True

        __ge__ = __lt__ = __le__ = __gt__

        def __bool__(self) -> bool:
            return True

        def __call__(self, *args: object, **kwargs: object) -> Any:
            return [("AZB_HOSTILE", self)]  # .items() of a mapping: a valid name, a hostile value

        def __add__(self, other: object) -> Any:
            return self

        __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = __add__
        __mod__ = __neg__ = __pos__ = __add__

        def splitlines(self) -> list[str]:
            return text.splitlines()

    return Hostile


def _render(name: str, text: str) -> str:
    env = build_environment(str(templates_dir()), is_shell(name), undefined=_hostile_class(text))
    # `script` marks a command azbench built with each value quoted (render_command, tested
    # below); here it stands for such a command.
    env.filters["script"] = lambda _value: Shell("python3 train.py")
    try:
        return env.get_template(name).render()
    except UnsafeValue as e:
        raise ConfigError(str(e)) from None


def _states(script: str) -> list[str]:
    """Per character of a bash script: 'code', 'single', 'double', 'comment' or 'heredoc'. Enough
    of bash for generated scripts: quotes, backslash escapes, `#` at a word's start, and
    here-documents with a quoted delimiter (their body is not expanded)."""
    states: list[str] = []
    state, i, pending_heredoc = "code", 0, None
    lines = script.split("\n")
    out_lines: list[list[str]] = []
    heredoc_end: str | None = None
    for line in lines:
        row: list[str] = []
        if heredoc_end is not None:
            row = ["heredoc"] * len(line)
            out_lines.append(row)
            if line == heredoc_end:
                heredoc_end = None
            continue
        i = 0
        while i < len(line):
            ch = line[i]
            if state == "single":
                row.append("single")
                if ch == "'":
                    state = "code"
            elif state == "double":
                row.append("double")
                if ch == "\\" and i + 1 < len(line):
                    row.append("double")
                    i += 1
                elif ch == '"':
                    state = "code"
            elif state == "comment":
                row.append("comment")
            else:
                if ch == "'":
                    state = "single"
                    row.append("single")
                elif ch == '"':
                    state = "double"
                    row.append("double")
                elif ch == "\\" and i + 1 < len(line):
                    row += ["code", "code"]
                    i += 1
                elif ch == "#" and (i == 0 or line[i - 1] in " \t;|&("):
                    state = "comment"
                    row.append("comment")
                elif line.startswith("<<'", i):
                    end = line.index("'", i + 3)
                    pending_heredoc = line[i + 3:end]
                    row += ["code"] * (end + 1 - i)
                    i = end
                else:
                    row.append("code")
            i += 1
        if state == "comment":
            state = "code"
        out_lines.append(row)
        if pending_heredoc is not None and state == "code":
            heredoc_end, pending_heredoc = pending_heredoc, None
    for n, row in enumerate(out_lines):
        states += row
        if n < len(out_lines) - 1:
            states.append("newline")
    return states


def _unsafe_places(script: str, text: str) -> list[str]:
    """Each place `text` occurs where a character of it is neither single-quoted, in a comment
    line, nor in a quoted here-document."""
    states = _states(script)
    assert len(states) == len(script)
    bad, start = [], script.find(text)
    while start != -1:
        kinds = set(states[start:start + len(text)])
        if not kinds <= {"single"} and not kinds <= {"comment"} and not kinds <= {"heredoc"}:
            line_no = script.count("\n", 0, start) + 1
            bad.append(f"line {line_no}: {script.splitlines()[line_no - 1][:160]!r} ({sorted(kinds)})")
        start = script.find(text, start + 1)
    return bad


def test_the_scanner_sees_an_unquoted_value() -> None:
    """The check itself can fail: text in double quotes or bare code is reported."""
    assert _unsafe_places('echo "X $(id)"\n', "$(id)")
    assert _unsafe_places("echo X $(id)\n", "$(id)")
    assert not _unsafe_places("echo 'X $(id)' # $(id)\n", "$(id)")


@pytest.mark.parametrize("name", SHELL_TEMPLATES)
def test_every_shell_template_quotes_a_hostile_value(name: str, tmp_path: Path) -> None:
    if not shutil.which("bash"):
        pytest.skip("bash not installed")
    for text in (HOSTILE, QUOTE_BREAKER):
        script = _render(name, text)
        path = tmp_path / "script.sh"
        path.write_text(script)
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, f"{name}: {check.stderr}"
    script = _render(name, HOSTILE)
    assert HOSTILE in script, f"{name}: the hostile value never rendered (the check would be empty)"
    # The hostile value holds a quote-free run of shell metacharacters; wherever it lands it must
    # be one single-quoted word, a comment, or a quoted here-document's text.
    assert _unsafe_places(script, HOSTILE) == [], name


@pytest.mark.parametrize("name", SHELL_TEMPLATES)
def test_a_value_with_a_newline_adds_no_line(name: str) -> None:
    text = "SHARP=1\ntouch /tmp/azbench-pwned #"
    try:
        script = _render(name, text)
    except ConfigError as e:
        assert "line break" in str(e) or "control" in str(e)
        return
    # Rendered: then every copy sits inside single quotes (a quoted word may hold a newline).
    assert _unsafe_places(script, text) == [], name


@pytest.mark.parametrize("name", OTHER_TEMPLATES)
def test_config_templates_refuse_a_line_break_and_keep_their_shape(name: str) -> None:
    if name == "cloud-init-expiry.yaml.j2":
        pytest.skip("macros only; rendered (and checked) inside cloud-init-head.yaml.j2")
    with pytest.raises(ConfigError, match="line break|control"):
        _render(name, "a\nruncmd: [touch, /tmp/azbench-pwned]")
    if name.endswith(".yaml.j2"):
        # A one-line hostile value cannot add a key or an item: the document's top level is the
        # template's own.
        benign = _render(name, "plainvalue")
        hostile = _render(name, HOSTILE)
        assert hostile.count("\n") == benign.count("\n")
        parsed = yaml.safe_load(benign)
        assert isinstance(parsed, dict)


def test_the_fabric_comment_of_a_p_value_cannot_start_a_command() -> None:
    """The reported case: `-p "SHARP=1<newline>touch x #"` once ended the comment
    `# {{ f.asked }}: {{ f.why }}` and ran `touch x` on the cluster; now it is refused first."""
    from orchestrator.recipes.catalog import check_params, get_recipe
    mlperf = "llama31_8b"
    with pytest.raises(ConfigError, match="control character"):
        check_params(get_recipe(mlperf), {"NCCL_SHARP_DISABLE": "1\ntouch x #"})
    with pytest.raises(ConfigError, match="control character"):
        check_params(get_recipe(mlperf), {"NCCL_SHARP_DISABLE": "1\x00"})


def test_a_recipe_command_quotes_a_hostile_parameter() -> None:
    """What `script` passes through unquoted: render_command quotes each value it substitutes."""
    import shlex
    from orchestrator.recipes.catalog import get_recipe, render_command
    command = render_command(get_recipe("smoke"), run_dir=HOSTILE, nodes=1)
    assert shlex.quote(HOSTILE + "/recipe") in command
    assert _unsafe_places(command, HOSTILE) == []


def test_render_names_the_template_of_a_refused_value(tmp_path: Path) -> None:
    (tmp_path / "t.sh.j2").write_text("# {{ why | prose }}\necho {{ x }}\n")
    assert render("t.sh.j2", tmp_path, why="ok", x="a b") == "# ok\necho 'a b'\n"
    with pytest.raises(ConfigError, match=r"t\.sh\.j2: .*line break"):
        render("t.sh.j2", tmp_path, why="a\ntouch x", x="b")
