"""The golden-file helper: it rewrites a golden only under AZBENCH_UPDATE_GOLDEN=1; otherwise a
missing or different golden fails with a diff and the file on disk stays as it was."""

from __future__ import annotations

import pytest

from testsupport.golden import UPDATE_ENV, check_golden


def test_a_match_passes(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)
    golden = tmp_path / "x.sh"
    golden.write_text("echo hi\n")
    check_golden(golden, "echo hi\n")


@pytest.mark.parametrize("value", [None, "", "0", "yes"])
def test_a_mismatch_fails_with_a_diff_and_leaves_the_golden_alone(tmp_path, monkeypatch, value):
    if value is None:
        monkeypatch.delenv(UPDATE_ENV, raising=False)
    else:
        monkeypatch.setenv(UPDATE_ENV, value)
    golden = tmp_path / "x.sh"
    golden.write_text("echo one\necho two\n")
    with pytest.raises(AssertionError) as err:
        check_golden(golden, "echo one\necho 2\n")
    assert "-echo two" in str(err.value) and "+echo 2" in str(err.value)
    assert golden.read_text() == "echo one\necho two\n"


def test_a_missing_golden_fails_and_is_not_created(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)
    golden = tmp_path / "sub" / "new.sh"
    with pytest.raises(AssertionError, match="missing golden file"):
        check_golden(golden, "text\n")
    assert not golden.exists()


def test_update_mode_writes_the_golden(tmp_path, monkeypatch):
    monkeypatch.setenv(UPDATE_ENV, "1")
    golden = tmp_path / "sub" / "new.sh"
    check_golden(golden, "first\n")
    check_golden(golden, "second\n")
    assert golden.read_text() == "second\n"
    monkeypatch.delenv(UPDATE_ENV)
    check_golden(golden, "second\n")
