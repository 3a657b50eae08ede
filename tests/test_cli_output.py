"""The output options of issue 31: `-o table|json|tsv` and `--query JMESPATH` as in az on
catalog, status, recipes list, results list and report (`--json` stays, the same as -o json);
`--version`; a name filter that matches nothing stored exits 2 naming the near names; `catalog`
fitted to the terminal with no cell cut. In-process (tests/cli_helpers.azbench_in_process)."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from orchestrator.cli.common import plain_rows, tsv_lines
from orchestrator.hardware.catalog import CATALOG
from orchestrator.store.database import ResultRow, RunRow, Store
from tests.cli_helpers import azbench_in_process, one_line_error


def az(home: Path, *args: str, env: dict[str, str] | None = None):
    return azbench_in_process(*args, home=home, env=env)


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A home with 3 results: bert twice (one run on cluster c1), gpt3 once."""
    home = tmp_path / "home"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        store.create_run(RunRow(id="r1", cluster="c1", recipe="bert", benchmark="bert", nodes=2,
                                state="succeeded"))
        for h, bench, system, run in [("a1", "bert", "ND_H100_v5", "r1"), ("b2", "bert", "ND_H200_v5", None),
                                      ("c3", "gpt3", "ND_H100_v5", None)]:
            store.add_result(ResultRow(content_hash=h, run_id=run, source="run" if run else "import",
                                       benchmark=bench, system=system, status="success", converged=True,
                                       minutes=10.0, nodes=2, gpus=16))
    return home


# -- -o json|tsv|table and --query on each command --------------------------------------------

def test_catalog_json_tsv_and_query(tmp_path: Path) -> None:
    home = tmp_path / "h"
    as_json = az(home, "catalog", "--json")
    assert az(home, "catalog", "-o", "json").out == as_json.out  # --json is -o json, byte for byte
    names = [s.name for s in CATALOG]
    assert [r["name"] for r in json.loads(as_json.out)] == names
    tsv = az(home, "catalog", "-o", "tsv").out.splitlines()
    assert [line.split("\t")[0] for line in tsv] == names  # no header, a row per size
    assert az(home, "catalog", "--query", "[].name", "-o", "tsv").out.splitlines() == names
    gpus = az(home, "catalog", "--query", "[?gpus_per_vm > `0`].[name, gpus_per_vm]", "-o", "tsv")
    assert "Standard_ND96isr_H100_v5\t8" in gpus.out.splitlines() and "Local_CPU" not in gpus.out
    picked = az(home, "catalog", "--query", "[?short=='ND H100 v5'] | [0].quota_family", "--output", "json")
    assert json.loads(picked.out) == "standardNDSH100v5Family"


def test_a_query_with_the_default_table_output_prints_a_plain_table(tmp_path: Path) -> None:
    result = az(tmp_path / "h", "catalog", "--query", "[?gpus_per_vm > `0`].{name: name, gpus: gpus_per_vm}",
                env={"COLUMNS": "120"})
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert re.search(r"name\s+.*gpus", lines[1]) and "Standard_ND96isr_H100_v5" in result.out
    assert "GPU VM catalog" not in result.out  # the command's own table is for no --query


def test_status_json_tsv_and_query(tmp_path: Path) -> None:
    home = tmp_path / "h"
    up = az(home, "up", "--provider", "fake", "--name", "f1", "--sku", "h100", "--nodes", "2", "--region", "eastus")
    assert up.code == 0, up.err
    first, second = json.loads(az(home, "status", "-o", "json").out), json.loads(az(home, "status", "--json").out)
    # cost so far and time left move with the clock between the two calls (a fake H100 x2 costs
    # $196.64/h: a cent every 0.18 s); each must only move forward, the rest is equal
    assert first["cost_so_far_usd"].keys() == second["cost_so_far_usd"].keys() == {"f1"}
    assert 0 <= first["cost_so_far_usd"]["f1"] <= second["cost_so_far_usd"]["f1"]
    clockless = ("cost_so_far_usd", "expires_in_s")
    assert {k: v for k, v in first.items() if k not in clockless} == \
        {k: v for k, v in second.items() if k not in clockless}
    assert first["expires_in_s"] == second["expires_in_s"] == {"f1": None}  # the fake has no expiry
    assert az(home, "status", "-o", "tsv", "--query", "clusters[].[name, state, nodes]").out == "f1\tready\t2\n"
    assert json.loads(az(home, "status", "--query", "clusters[0].sku", "-o", "json").out) == \
        "Standard_ND96isr_H100_v5"
    one = az(home, "status", "f1", "--query", "clusters[].name", "-o", "tsv")
    assert one.code == 0 and one.out == "f1\n", one.err


def test_recipes_list_json_tsv_and_query(tmp_path: Path) -> None:
    home = tmp_path / "h"
    recipes = json.loads(az(home, "recipes", "list", "-o", "json").out)
    assert recipes == json.loads(az(home, "recipes", "list", "--json").out)
    names = az(home, "recipes", "list", "-o", "tsv", "--query", "[].name").out.splitlines()
    assert names == [r["name"] for r in recipes] and "smoke" in names
    smoke = az(home, "recipes", "list", "-o", "tsv", "--query", "[?name=='smoke'].[benchmark, required_runs]")
    runs = next(r["required_runs"] for r in recipes if r["name"] == "smoke")
    assert smoke.out == f"smoke\t{runs}\n"


def test_results_list_json_tsv_and_query(stored: Path) -> None:
    rows = json.loads(az(stored, "results", "list", "-o", "json").out)
    assert rows == json.loads(az(stored, "results", "list", "--json").out)
    assert [r["content_hash"] for r in rows] == ["a1", "b2", "c3"] and "summary_json" not in rows[0]
    assert az(stored, "results", "list", "-o", "tsv", "--query", "[].[id, benchmark, system]").out == \
        "1\tbert\tND_H100_v5\n2\tbert\tND_H200_v5\n3\tgpt3\tND_H100_v5\n"
    assert az(stored, "results", "list", "--benchmark", "bert", "--query", "length(@)", "-o", "json").out == "2\n"
    table = az(stored, "results", "list", env={"COLUMNS": "160"})
    assert "Results" in table.out and "ND_H200_v5" in table.out


def test_report_json_tsv_and_query(stored: Path) -> None:
    plain = az(stored, "report", "--json")
    assert plain.code == 0, plain.err
    assert set(json.loads(az(stored, "report", "-o", "json").out)) == set(json.loads(plain.out))
    assert json.loads(az(stored, "report", "--benchmark", "gpt3", "--query", "filters", "-o", "json").out) == \
        {"benchmark": "gpt3"}
    tsv = az(stored, "report", "--query", "keys(@)", "-o", "tsv")
    assert tsv.code == 0 and "generated_at" in tsv.out.splitlines(), tsv.err


# -- bad -o and --query, --json with another -o ------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["catalog", "-o", "xml"], "usage error: Invalid value for '--output' / '-o'"),
    (["recipes", "list", "--query", "[?"], "config error: --query: invalid JMESPath expression '[?': "
                                          "incomplete expression (at column 2)"),
    (["status", "--query", "a.b."], "config error: --query: invalid JMESPath expression 'a.b.': expecting: "
                                   "['quoted_identifier', 'unquoted_identifier', 'lbracket', 'lbrace'], "
                                   "got: eof (at column 4)"),
    (["catalog", "--query", ""], "config error: --query: invalid JMESPath expression '': cannot be empty"),
    (["catalog", "--query", "nosuch(@)"], "config error: --query 'nosuch(@)': unknown function: nosuch()"),
    (["report", "--query", "sum(@)"], "config error: --query 'sum(@)': in function sum(), invalid type"),
    (["results", "list", "--json", "-o", "tsv"], "config error: --json is -o json: it cannot be combined "
                                                "with -o tsv"),
])
def test_bad_output_options_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = az(tmp_path / "h", *args)
    assert result.code == 2 and result.out == ""
    assert one_line_error(result).startswith("azbench: " + message), result.err


# -- --version --------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(tmp_path: Path, flag: str) -> None:
    result = az(tmp_path / "h", flag)
    assert (result.code, result.out, result.err) == (0, f"azbench {version('azbench')}\n", "")
    assert not (tmp_path / "h").exists()  # no store opened


def test_help_mentions_version_and_the_output_options(tmp_path: Path) -> None:
    assert "--version" in az(tmp_path / "h", "--help").out
    helped = az(tmp_path / "h", "results", "list", "--help").out
    assert "--output" in helped and "-o" in helped and "--query" in helped and "JMESPATH" in helped


# -- filters that match nothing ----------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["report", "--benchmark", "bertt"],
     "not found: no results for benchmark 'bertt' (stored: bert, gpt3; did you mean bert?)"),
    (["report", "--benchmark", "BERT", "-o", "json"],
     "not found: no results for benchmark 'BERT' (stored: bert, gpt3; did you mean bert?)"),
    (["report", "--system", "ND_H100_v6"],
     "not found: no results for system 'ND_H100_v6' (stored: ND_H100_v5, ND_H200_v5; "
     "did you mean ND_H100_v5 or ND_H200_v5?)"),
    (["report", "--cluster", "c11"], "not found: no results for cluster 'c11' (stored: c1; did you mean c1?)"),
    (["report", "--benchmark", "resnet"], "not found: no results for benchmark 'resnet' (stored: bert, gpt3)"),
    (["results", "list", "--benchmark", "gtp3"],
     "not found: no results for benchmark 'gtp3' (stored: bert, gpt3; did you mean gpt3?)"),
    (["results", "list", "--benchmark", "bert", "--system", "nd_h200_v5"],
     "not found: no results for system 'nd_h200_v5' (stored: ND_H100_v5, ND_H200_v5; did you mean ND_H200_v5"),
])
def test_a_filter_that_matches_nothing_names_the_near_names(stored: Path, args: list[str], message: str) -> None:
    result = az(stored, *args)
    assert result.code == 2 and result.out == ""
    assert one_line_error(result).startswith("azbench: " + message), result.err


def test_known_names_that_select_nothing_together_are_not_an_error(stored: Path) -> None:
    report = az(stored, "report", "--benchmark", "gpt3", "--system", "ND_H200_v5")
    assert (report.code, report.err) == (0, "")
    assert "no results match these filters" in report.out
    listed = az(stored, "results", "list", "--benchmark", "gpt3", "--system", "ND_H200_v5", "-o", "json")
    assert (listed.code, json.loads(listed.out)) == (0, [])


def test_an_empty_store_keeps_the_friendly_no_results_yet(tmp_path: Path) -> None:
    report = az(tmp_path / "h", "report", "--benchmark", "bertt")
    assert (report.code, report.err) == (0, "")
    assert "no results yet" in report.out
    listed = az(tmp_path / "h", "results", "list", "--benchmark", "bertt", "-o", "tsv")
    assert (listed.code, listed.out, listed.err) == (0, "", "")


def test_imported_results_only_have_no_cluster_to_filter_by(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        store.add_result(ResultRow(content_hash="x", source="import", benchmark="bert", status="success",
                                   converged=True))
    result = az(home, "report", "--cluster", "c1")
    assert result.code == 2
    assert one_line_error(result) == ("azbench: not found: no results for cluster 'c1' "
                                      "(no stored result has a cluster)")


# -- catalog at 80 and 200 columns -------------------------------------------------------------

@pytest.mark.parametrize("width", [80, 100, 200, 300])
def test_catalog_cuts_no_cell_at_any_width(tmp_path: Path, width: int) -> None:
    result = az(tmp_path / "h", "catalog", env={"COLUMNS": str(width)})
    assert result.code == 0, result.err
    assert "…" not in result.out  # rich's ellipsis: a cut cell
    assert max(len(line) for line in result.out.splitlines()) <= width
    for size in CATALOG:
        assert re.search(rf"│ {re.escape(size.name)}\s+│", result.out), size.name  # whole, on one line


def test_catalog_at_200_columns_shows_every_column_and_at_80_says_what_it_left_out(tmp_path: Path) -> None:
    wide = az(tmp_path / "h", "catalog", env={"COLUMNS": "200"}).out
    assert "not shown" not in wide
    for family in {s.quota_family for s in CATALOG if s.quota_family}:
        assert family in wide
    assert "nd128isr_ndr_gb200_v6" in wide and "quota family" in wide and "price/h" in wide
    narrow = az(tmp_path / "h", "catalog", env={"COLUMNS": "80"}).out
    for header in ("size", "name", "GPUs/VM", "price/h"):
        assert header in narrow.splitlines()[2]
    assert "not shown at 80 columns: aliases" in narrow and "-o json has every field" in narrow


# -- the renderers ------------------------------------------------------------------------------

def test_tsv_lines_follow_az() -> None:
    assert tsv_lines([{"a": 1, "b": None, "c": True}, {"a": 2.5, "b": "x\ty\nz", "c": False}]) == \
        ["1\t\ttrue", "2.5\tx\\ty\\nz\tfalse"]
    assert tsv_lines([[1, "a"], [2, "b"]]) == ["1\ta", "2\tb"]
    assert tsv_lines("one") == ["one"] and tsv_lines(["a", "b"]) == ["a", "b"]
    # flat, as knack writes it: a nested list is its length, a nested object an empty cell
    assert tsv_lines({"k": [1, 2], "o": {"x": 1}, "s": "v"}) == ["2\t\tv"]
    assert tsv_lines([{"a": {"deep": [1]}, "b": 1}, {"a": None, "b": 2}]) == ["\t1", "\t2"]
    assert tsv_lines([]) == []


def test_plain_rows_for_a_queried_value() -> None:
    assert plain_rows([{"a": 1}, {"a": 2, "b": "x"}]) == (["a", "b"], [["1", ""], ["2", "x"]])
    assert plain_rows([[1, 2], [3]]) == (["Column1", "Column2"], [["1", "2"], ["3", ""]])
    assert plain_rows(["x", "y"]) == (["Result"], [["x"], ["y"]])
    assert plain_rows({"a": 1}) == (["a"], [["1"]])


# -- every command that prints data (issue 38, point 8) ----------------------------------------------


def _commands() -> list[tuple[str, set[str]]]:
    import typer
    import typer.main

    from orchestrator.cli.app import app

    def walk(cmd, path):  # a click group or command (the root's are loaded by name)
        subs = getattr(cmd, "commands", None)
        if subs:
            for name in list(subs):
                yield from walk(cmd.get_command(typer.Context(cmd), name), [*path, name])
        else:
            yield " ".join(path), {o for p in cmd.params for o in getattr(p, "opts", [])}
    return list(walk(typer.main.get_command(app), []))


def test_every_command_that_prints_data_takes_output_and_query() -> None:
    """A command that prints data (it has --json, or it prints a log) also takes -o
    table|json|tsv and --query; the rest print one confirmation line or hand over a shell."""
    commands = dict(_commands())
    printing = {name for name, opts in commands.items() if "--json" in opts} | {"logs"}
    assert {"compare", "baseline set", "baseline list", "baseline show", "results show",
            "recipes show", "logs", "health", "plan", "report"} <= printing
    assert [name for name in sorted(printing) if not {"-o", "--output", "--query"} <= commands[name]] == []
    assert sorted(set(commands) - printing) == ["baseline delete", "init", "ssh"]


@pytest.fixture
def baselined(stored: Path) -> Path:
    """`stored` with run r2 of a sweep, its log and a baseline 'b1' made from it."""
    with Store.open(f"sqlite:///{stored / 'azbench.db'}") as store:
        store.create_run(RunRow(id="r2", cluster="c1", recipe="bert", benchmark="bert", nodes=2,
                                state="succeeded", sweep_id="20260101T000000-s1"))
        store.add_result(ResultRow(content_hash="d4", run_id="r2", source="run", benchmark="bert",
                                   system="ND_H100_v5", status="success", converged=True, minutes=12.5,
                                   nodes=2, gpus=16, sku="Standard_ND96isr_H100_v5"))
    made = az(stored, "baseline", "set", "b1", "--sweep", "20260101T000000-s1", "--yes", "-o", "json")
    assert made.code == 0, made.err
    return stored


def test_baseline_and_compare_take_output_and_query(baselined: Path) -> None:
    home = baselined
    listed = az(home, "baseline", "list", "-o", "tsv", "--query", "[].name")
    assert listed.code == 0 and listed.out == "b1\n", listed.err
    shown = az(home, "baseline", "show", "b1", "-o", "tsv", "--query", "entries[].[benchmark, nodes, metrics.time_to_train[0]]")
    assert shown.out == "bert\t2\t12.5\n", shown.err
    flat = az(home, "baseline", "show", "b1", "-o", "tsv")
    assert flat.code == 0 and "{" not in flat.out and "[" not in flat.out  # flat: no JSON in a cell
    compared = az(home, "compare", "b1", "--sweep", "20260101T000000-s1", "-o", "json",
                  "--query", "deltas[?metric=='time_to_train'].[current_mean, baseline_mean, verdict]")
    assert compared.code == 0 and json.loads(compared.out) == [[12.5, 12.5, "within"]], compared.err
    tsv = az(home, "compare", "b1", "--sweep", "20260101T000000-s1", "-o", "tsv", "--query", "deltas[].metric")
    assert tsv.out.splitlines() == ["time_to_train"]
    assert az(home, "compare", "b1", "--sweep", "20260101T000000-s1", "--json").out == \
        az(home, "compare", "b1", "--sweep", "20260101T000000-s1", "-o", "json").out


def test_results_show_recipes_show_and_logs_take_output_and_query(baselined: Path) -> None:
    home = baselined
    one = az(home, "results", "show", "1", "-o", "tsv", "--query", "[benchmark, system, minutes]")
    assert one.out == "bert\nND_H100_v5\n10.0\n", one.err  # a lone list: an item a line, as az
    assert json.loads(az(home, "results", "show", "1", "-o", "json").out)["id"] == 1
    recipe = az(home, "recipes", "show", "smoke", "-o", "tsv", "--query", "[resolved.[recipe, nodes]]")
    assert recipe.out == "smoke\t1\n", recipe.err
    log = home / "runs" / "r2" / "attempt-1" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text(":::MLLOG {\"key\": \"run_start\"}\nstep 1\n")
    logs = az(home, "logs", "r2", "-o", "json")
    assert logs.code == 0 and json.loads(logs.out) == {
        "run_id": "r2", "attempt": 1, "lines": [":::MLLOG {\"key\": \"run_start\"}", "step 1"]}, logs.err
    assert az(home, "logs", "r2", "-o", "tsv", "--query", "lines[]").out == ":::MLLOG {\"key\": \"run_start\"}\nstep 1\n"
    assert az(home, "logs", "r2").out == log.read_text()  # the default: the log as it is
    follow = az(home, "logs", "r2", "--follow", "-o", "json")
    assert follow.code == 2 and "leave out --follow" in one_line_error(follow)


def test_health_takes_output_and_query(stored: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate itself runs on real clusters elsewhere (tests/test_fleet_gate.py); here its
    report is printed in each format."""
    from contextlib import nullcontext

    from orchestrator.clusters import lifecycle
    from orchestrator.runs import fleet_gate
    from orchestrator.runs.fleet import FleetReport, Verdict
    report = FleetReport(checked=["n1", "n2"], verdicts=[Verdict("n2", "collective", "slow", 10.0, 75.0, " GB/s")],
                         drained=["n2"], seconds=1.5)
    monkeypatch.setattr(lifecycle, "require_cluster", lambda name, store: object())
    monkeypatch.setattr(lifecycle, "reachable", lambda name, store: object())  # health logs in: it asks this
    monkeypatch.setattr(lifecycle, "connect", lambda cluster: nullcontext(object()))
    monkeypatch.setattr(fleet_gate, "gate_cluster", lambda *a, **k: report)
    tsv = az(stored, "health", "c1", "-o", "tsv", "--query", "verdicts[].[node, check, status, value]")
    assert tsv.code == 9 and tsv.out == "n2\tcollective\tslow\t10.0\n", tsv.err  # 9: a node was drained
    data = json.loads(az(stored, "health", "c1", "-o", "json").out)
    assert data["bad_nodes"] == ["n2"] and data["drained"] == ["n2"]
    flat = az(stored, "health", "c1", "-o", "tsv").out.split("\t")
    assert flat[:2] == ["2", "1"]  # checked: 2 nodes, verdicts: 1 (knack: a nested list is its length)


def test_system_takes_the_name_the_report_prints(tmp_path: Path) -> None:
    """`--system` takes a system as the report prints it: 'v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo',
    or its tail when every row shares the head; a label that names nothing lists the labels."""
    home = tmp_path / "home"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        for h, rnd, system in [("a", "v5.1", "hsg_ngpu5120_ngc25.09_nemo"), ("b", "v5.0", "hsg_ngpu5120_ngc25.09_nemo"),
                               ("c", "v5.1", "tyche_ngpu512_ngc25.09_nemo")]:
            store.add_result(ResultRow(content_hash=h, source="import", benchmark="llama31_405b", system=system,
                                       round=rnd, submitter="NVIDIA", status="success", converged=True,
                                       minutes=10.0, nodes=1280, gpus=5120))
    full = az(home, "results", "list", "--system", "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo", "-o", "tsv",
              "--query", "[].[content_hash, round]")
    assert full.code == 0 and full.out == "a\tv5.1\n", full.err
    tail = az(home, "results", "list", "--system", "NVIDIA/hsg_ngpu5120_ngc25.09_nemo", "--query", "[].content_hash",
              "-o", "tsv")
    assert tail.out.splitlines() == ["a", "b"]
    report = az(home, "report", "--system", "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo", "--query",
                "groups[].[round, system]", "-o", "tsv")
    assert report.code == 0 and report.out == "v5.1\thsg_ngpu5120_ngc25.09_nemo\n", report.err
    wrong = az(home, "report", "--system", "v5.1/NVIDIA/hsg_ngpu5121_ngc25.09_nemo")
    assert wrong.code == 2 and "did you mean v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo" in one_line_error(wrong)


# A whole number of 4 digits or more written without thousands separators ("8192"): not part of
# a name (ngpu5120), a date (2026-11-01), a decimal or a path.
BARE = re.compile(r"(?<![\w.,/:+#-])\d{4,}(?![\w,:/#]|\.\d|-\d)")
QUOTED = ("al. ", "MODEL_TFLOP_PER_SAMPLE ", "Generated ")  # a year cited, a config's literal


def _bare_numbers(text: str) -> list[str]:
    return [text[max(0, m.start() - 40):m.end() + 10] for m in BARE.finditer(text)
            if not text[:m.start()].endswith(QUOTED)]


def test_one_number_format_in_every_view(tmp_path: Path) -> None:
    """Counts and amounts of 1,000 or more carry thousands separators in the terminal report,
    its Markdown, the site's tables, `results list`, `plan`, `baseline show` and `compare`
    (formats.py is the one home): no "10,752" beside "8192"."""
    from orchestrator.results.importer import import_path
    from tests.conftest import SHARED
    from testsupport.mlperf_tree import write_tree
    home = tmp_path / "home"
    home.mkdir()
    with Store.open(f"sqlite:///{home / 'azbench.db'}") as store:
        import_path(store, write_tree(tmp_path / "tree"), archive_dir=tmp_path / "archive")
        if (SHARED / "mlperf-logs").is_dir():
            import_path(store, SHARED / "mlperf-logs", archive_dir=tmp_path / "archive")
    wide = {"COLUMNS": "200"}
    views = {
        "report": az(home, "report", "--runs", "--vs-published", env=wide),
        "markdown": az(home, "report", "--markdown"),
        "results list": az(home, "results", "list", env=wide),
        "plan": az(home, "plan", "llama31_405b", "--sku", "gb200", env=wide),
        "baseline set": az(home, "baseline", "set", "b", "--benchmark", "llama31_405b", "--yes", env=wide),
        "baseline show": az(home, "baseline", "show", "b", env=wide),
        "compare": az(home, "compare", "b", "--benchmark", "llama31_405b", env=wide),
    }
    site = az(home, "report", "--html", str(tmp_path / "site"))
    assert site.code == 0, site.err
    cells = [html for page in (tmp_path / "site").rglob("*.html")
             for html in re.findall(r"<td[^>]*>(.*?)</td>", page.read_text(), re.S)]
    views["site tables"] = type(site)(0, "\n".join(cells), "")
    found = {name: _bare_numbers(v.out) for name, v in views.items()}
    assert all(v.code in (0, 8) for v in views.values()), {k: v.err for k, v in views.items() if v.code}
    assert {k: v for k, v in found.items() if v} == {}
    assert "1,024" in views["report"].out and "1,024" in views["markdown"].out  # the 128 x 8 H100 system
    if (SHARED / "mlperf-logs").is_dir():
        assert "10,752" in views["report"].out and "8,192" in views["report"].out
