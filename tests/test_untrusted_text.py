"""Untrusted text reaches no terminal, Markdown or chart as markup (issue 48, point 5): one hostile
string (OSC 52 clipboard write, OSC 0 title, ESC[2J clear screen, OSC 8 link, U+202E
right-to-left override, zero-width characters) goes through every command that prints it, in
a file's name, a folder's name, a log's GPU name and NCCL version, and a -p value; no output
holds ESC, BEL, a bidi control or a zero-width character."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.safetext import clean, json_text, markdown, plot, plot_figure
from tests.cli_helpers import CliResult, azbench_in_process

HOSTILE = ("\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;PWNED\x07\x1b[2J"
           "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\\u202eNVI\u200bDIA\u2060\ufeff")
# ESC, BEL, C1 controls, bidi marks/overrides/isolates, zero-width and invisible format characters.
BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\u061c]")
DATA = Path(__file__).parent / "data" / "nccl_excerpts"


def _clean_output(*results: CliResult) -> None:
    for result in results:
        for text in (result.out, result.err):
            found = BAD.search(text)
            assert found is None, f"{found.group()!r} in {text[max(0, found.start() - 60):found.end() + 60]!r}"


def _hostile_nccl_file(folder: Path) -> Path:
    text = (DATA / "dgx-spark-playbooks-25_all_gather_2node.txt").read_text()
    text = text.replace("version 2.17.6", f"version 2.17.6{HOSTILE}").replace("NVIDIA GB10", f"NVIDIA GB10{HOSTILE}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"all_gather{HOSTILE.replace('/', '_')}.txt"
    path.write_text(text)
    return path


def test_the_sanitizer_strips_every_kind() -> None:
    assert clean(f"a{HOSTILE}b") == "a]52;c;cm0gLXJmIH4=]0;PWNED[2J]8;;https://evil.example\\link]8;;\\NVIDIAb"
    assert clean("x\u2028y\u00adz") == "x yz"
    assert BAD.search(json_text('{"a": "' + HOSTILE.replace("\\", "\\\\") + '"}')) is None


def test_markdown_escapes_the_backslash_and_the_pipe() -> None:
    # `\[x\](url)` would read as a link once Markdown took the backslashes; `a\|b` would split a cell.
    assert markdown("\\[x\\](https://evil.example)") == "\\\\\\[x\\\\\\](https://evil.example)"
    assert markdown("a\\|b", cell=True) == "a\\\\\\|b"


def test_chart_text_is_plain_text() -> None:
    assert plot('<a href="https://evil.example">sys</a> & co<br>x') == \
        '&lt;a href="https://evil.example">sys&lt;/a> &amp; co<br>x'
    figure = {"data": [{"name": "<a href='x'>n</a>", "text": ["<b>ok</b><span style='x'>"]}], "layout": {}}
    assert plot_figure(figure) == {"data": [{"name": "&lt;a href='x'>n&lt;/a>",
                                             "text": ["<b>ok</b>&lt;span style='x'>"]}], "layout": {}}


def test_fabric_inspect_and_import_print_no_escape(tmp_path: Path) -> None:
    path = _hostile_nccl_file(tmp_path / "in")
    home = tmp_path / "home"
    inspected = azbench_in_process("fabric", "inspect", str(path), home=home)
    assert "all_gather" in inspected.out and "NVIDIA" in inspected.out, inspected.out + inspected.err
    assert "]0;PWNED" in inspected.out  # the hostile text reached the output, cleaned
    as_json = azbench_in_process("fabric", "inspect", str(path), "--json", home=home)
    tsv = azbench_in_process("fabric", "inspect", str(path), "-o", "tsv", home=home)
    imported = azbench_in_process("results", "import", str(path), home=home)
    assert imported.code == 0 and "imported 1 nccl-tests run" in imported.out, imported.err
    report = azbench_in_process("report", home=home)
    markdown_report = azbench_in_process("report", "--markdown", home=home)
    _clean_output(inspected, as_json, tsv, imported, report, markdown_report)


def test_an_mlperf_import_and_listing_print_no_escape(tmp_path: Path) -> None:
    from tests.test_hostile_cli import _crafted_tree
    tree = _crafted_tree(tmp_path / f"tree{HOSTILE}", (f"1xH100{HOSTILE}",))
    home = tmp_path / "home"
    imported = azbench_in_process("results", "import", "--no-compliance", str(tree), home=home)
    assert imported.code == 0 and " from " in imported.out, imported.err
    assert "]0;PWNED" in imported.out  # the `from DIR` line names the folder, cleaned
    listed = azbench_in_process("results", "list", home=home)
    tsv = azbench_in_process("results", "list", "-o", "tsv", home=home)
    table = azbench_in_process("results", "list", "--query", "[].system", "-o", "table", home=home)
    as_json = azbench_in_process("results", "list", "--json", home=home)
    report = azbench_in_process("report", "--markdown", home=home)
    _clean_output(imported, listed, tsv, table, as_json, report)
    assert "NVIDIA" in tsv.out or "1xH100" in tsv.out


def test_run_dry_run_prints_no_bidi_or_zero_width_from_a_p_value(tmp_path: Path) -> None:
    """A -p value with a control character is refused (below); one with a bidi override or a
    zero-width character is a valid value, and its warning prints without them."""
    home = tmp_path / "home"
    dry = azbench_in_process("run", "llama31_8b", "--sku", "h100", "--nodes", "8", "--dry-run",
                             "-p", "SHARP=1\u202eNVI\u200bDIA\u2060\ufeff", home=home)
    assert dry.code == 0, dry.err
    assert "warning: SHARP=1NVIDIA" in dry.out, dry.out[:2000]
    _clean_output(dry)


@pytest.mark.parametrize("value", ["1\ntouch /tmp/azbench-pwned #", "1\x00", "1\rtouch x", "1" + HOSTILE])
def test_a_p_value_with_a_line_break_or_nul_is_refused_exit_2(tmp_path: Path, value: str) -> None:
    result = azbench_in_process("run", "llama31_8b", "--sku", "h100", "--nodes", "8", "--dry-run",
                                "-p", f"SHARP={value}", home=tmp_path / "home")
    assert result.code == 2, result.out + result.err
    assert "control character" in result.err and "touch" not in result.out


def test_a_pulled_runs_params_cannot_inject_at_attach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot carries a "running" run whose spec has a parameter with a newline: `run
    --attach` checks the stored spec as `run` would, and refuses it before any cluster is
    reached (exit 2)."""
    from orchestrator.errors import ConfigError
    from orchestrator.runs.execute import attach_run
    from orchestrator.specs.run import RunSpec
    from orchestrator.store.database import Store
    from orchestrator.store.schema import RunRow
    monkeypatch.setenv("AZBENCH_HOME", str(tmp_path / "home"))
    spec = RunSpec.model_validate({"recipe": "llama31_8b", "params": {"SHARP": "1\ntouch /tmp/azbench-pwned #"}})
    with Store.open() as store:
        store.create_run(RunRow(id="r1", cluster="c", recipe="llama31_8b", benchmark="llama31_8b", nodes=8,
                                state="running", spec_json=spec.model_dump_json()))
        with pytest.raises(ConfigError, match="control character") as err:
            attach_run("r1", store)
    assert err.value.exit_code == 2



def test_progress_lines_carry_no_escape_from_the_cloud_or_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    """The provisioning step line (a VM's boot text in its detail), a run's events and its
    progress notes (a log's text) reach stderr cleaned, on a terminal and off it."""
    from orchestrator.cli.clusters import _step_line
    from orchestrator.cli.run import _progress_view
    from orchestrator.models import JobState
    from orchestrator.providers.azure.lro import ProgressEvent
    from orchestrator.runs.attempts import RunEvent
    from orchestrator.runs.monitor import Progress

    _step_line(ProgressEvent(action="booting", kind="vm", name=f"vm0{HOSTILE}", detail=f"cloud-init {HOSTILE}"))
    for tty in (False, True):
        view = _progress_view(enabled=True)
        view.tty = tty
        view.event(RunEvent(run_id="r1", kind="retry", message=f"retrying: {HOSTILE}"))
        view.show(Progress(run_id="r1", attempt=1, nodes=2, state=JobState.RUNNING, note=f"log says {HOSTILE}"))
        view.show(Progress(run_id="r1", attempt=1, nodes=2, state=JobState.RUNNING, step=3, slowest=f"node7{HOSTILE}"))
    err = capsys.readouterr().err
    shown = err.replace("\r\x1b[K", "")  # the view's own line reset on a terminal, nothing else
    found = BAD.search(shown)
    assert found is None, repr(shown[max(0, found.start() - 60):found.end() + 60])
    assert "vm0" in shown and "retrying:" in shown and "log says" in shown and "node7" in shown


def test_the_site_holds_no_escape_from_a_folders_name(tmp_path: Path) -> None:
    """Autoescape makes `<` inert but keeps a raw ESC: every page's text is cleaned too."""
    from tests.test_hostile_cli import _crafted_tree
    tree = _crafted_tree(tmp_path / f"tree{HOSTILE}", (f"1xH100{HOSTILE}",))
    home = tmp_path / "home"
    assert azbench_in_process("results", "import", "--no-compliance", str(tree), home=home).code == 0
    site = tmp_path / "site"
    written = azbench_in_process("report", "--html", str(site), home=home)
    assert written.code == 0, written.err
    pages = sorted(site.rglob("*.html"))
    assert pages
    texts = {p.name: p.read_text() for p in pages}
    assert any("PWNED" in t for t in texts.values())  # the hostile name reached a page, cleaned
    for name, text in texts.items():
        found = BAD.search(text)
        assert found is None, f"{name}: {text[max(0, found.start() - 60):found.end() + 60]!r}"
