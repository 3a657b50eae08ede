"""One exit-code table (errors.EXIT_CODES): `azbench --help` prints it, README.md's "Exit codes"
table says the same, and every AzbenchError exits with a code the table explains."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator import errors
from orchestrator.errors import EXIT_CODES, AzbenchError
from tests.cli_helpers import azbench

README = Path(__file__).resolve().parents[1] / "README.md"


def _subclasses(cls: type) -> list[type]:
    return [cls] + [s for sub in cls.__subclasses__() for s in _subclasses(sub)]


def test_help_lists_every_exit_code_with_its_meaning(azbench_home):
    result = azbench("--help", home=azbench_home)
    assert result.code == 0
    lines = {line.strip() for line in result.out.splitlines()}
    for code, meaning in EXIT_CODES.items():
        assert f"{code} {meaning}" in lines, f"--help lacks exit code {code}"


def test_readme_exit_code_table_is_exit_codes_exactly():
    text = README.read_text()
    section = text[text.index("## Exit codes\n"):]
    section = section[: section.find("\n## ", 1)]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, re.M)
    assert {int(code): meaning for code, meaning in rows} == EXIT_CODES
    assert [int(code) for code, _ in rows] == list(EXIT_CODES)  # same order too


def test_every_error_class_exits_with_a_code_in_the_table():
    classes = [c for c in _subclasses(AzbenchError) if c.__module__ == errors.__name__]
    assert len(classes) >= 10
    missing = {c.__name__: c.exit_code for c in classes if c.exit_code not in EXIT_CODES}
    assert not missing
    assert EXIT_CODES[errors.MissingCapability.exit_code].startswith("not available")
    assert errors.EXIT_UNHEALTHY == 9 and "health" in EXIT_CODES[9]
