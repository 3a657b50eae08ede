"""Tables that fit (issue 49): every table-printing command, at 80 and 100 columns, from one
store with long names (Dell's v5.1 1xXE9680Lx8B200-SXM-180GB and 1xXE9685Lx8B200-SXM-180GB,
NVIDIA's, a long cluster name and a run id), prints no line wider than the width, no cell cut
with "…", and every identifier a user types or tells apart whole on one line.

The logs are synthetic MLLOG under the published trees' names; where a mirror of
mlcommons/training_results_v5.1 sits beside the checkout (../.mirror), Dell's own llama2_70b_lora
logs are added, and the shared logs (../shared/mlperf-logs) when present.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len

from orchestrator import paths
from orchestrator.results.importer import import_path
from orchestrator.store.database import Store
from tests.cli_helpers import azbench_in_process
from tests.conftest import SHARED
from tests.test_goodput import cluster, killed_after_checkpoint_lines, run_row

MIRROR = Path(__file__).resolve().parents[2] / ".mirror" / "mlcommons+training_results_v5.1" / "repo"
DELL = ("1xXE9680Lx8B200-SXM-180GB", "1xXE9685Lx8B200-SXM-180GB")
NVIDIA = "theia_ngpu512_ngc25.09_nemo_with_a_longer_name"
CLUSTER = "azbench-alice-nd-h100-v5-eastus2-nightly"
RUN = "r20261202-014902-156d55"


def _log(org: str, benchmark: str, minutes: float, seed: int) -> str:
    def ev(t: int, key: str, value: object = None, **meta: object) -> str:
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                         "key": key, "value": value, "metadata": meta})
    start = 1_700_000_000_000 + seed * 10_000_000
    stop = start + int(minutes * 60_000)
    lines = [ev(start - 5, "submission_benchmark", benchmark), ev(start - 4, "submission_org", org),
             ev(start - 3, "global_batch_size", 8), ev(start, "run_start")]
    lines += [ev(start + (stop - start) * k // 10, "tracked_stats", {"train_step_time": 1.5}, step=k)
              for k in range(1, 10)]
    lines.append(ev(stop, "run_stop", status="success"))
    return "\n".join(lines) + "\n"


def _tree(root: Path) -> Path:
    for org, systems in (("Dell", DELL), ("NVIDIA", (NVIDIA,))):
        (root / "v5.1" / org / "systems").mkdir(parents=True)
        for n, system in enumerate(systems):
            (root / "v5.1" / org / "systems" / f"{system}.json").write_text(json.dumps(
                {"submitter": org, "system_name": system, "number_of_nodes": "1",
                 "accelerators_per_node": "8", "accelerator_model_name": "NVIDIA B200-SXM-180GB"}))
            for bench in ("llama2_70b_lora", "retinanet"):
                folder = root / "v5.1" / org / "results" / system / bench
                folder.mkdir(parents=True)
                for k in range(3):
                    (folder / f"result_{k}.txt").write_text(_log(org, bench, 10.0 + n + k * 0.1, n * 10 + k))
    if (MIRROR / "HEAD").exists() or (MIRROR / ".git").exists():
        for system in DELL:
            folder = root / "v5.1-mirror" / "v5.1" / "Dell" / "results" / system / "llama2_70b_lora"
            folder.mkdir(parents=True)
            (root / "v5.1-mirror" / "v5.1" / "Dell" / "systems").mkdir(parents=True, exist_ok=True)
            (root / "v5.1-mirror" / "v5.1" / "Dell" / "systems" / f"{system}.json").write_bytes(
                subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:Dell/systems/{system}.json"],
                               capture_output=True).stdout)
            for k in range(10):
                done = subprocess.run(["git", "-C", str(MIRROR), "show",
                                       f"HEAD:Dell/results/{system}/llama2_70b_lora/result_{k}.txt"],
                                      capture_output=True)
                if done.returncode == 0:
                    (folder / f"result_{k}.txt").write_bytes(done.stdout)
    return root


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("wide") / "home"
    tree = _tree(tmp_path_factory.mktemp("tree"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZBENCH_HOME", str(home))
        patch.delenv("AZBENCH_DB_URL", raising=False)
        with Store.open() as store:
            for part in (tree / "v5.1", tree / "v5.1-mirror"):
                if part.is_dir():
                    assert import_path(store, part).imported
            if (SHARED / "mlperf-logs").is_dir():
                import_path(store, SHARED / "mlperf-logs")
            store.save_cluster(cluster().model_copy(update={"name": CLUSTER}), owner="alice")
            store.create_run(run_row().model_copy(update={"id": RUN, "cluster": CLUSTER}))
            attempts, lines = killed_after_checkpoint_lines()
            for a in attempts:
                store.add_attempt(a.model_copy(update={"run_id": RUN}))
            for n, text in lines.items():
                log = paths.local_train_log(RUN, n)
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("\n".join(text) + "\n")
    base = azbench_in_process("baseline", "set", "wide", "--since", "2000-01-01", "--yes", home=home)
    assert base.code == 0, base.err
    return home


COMMANDS = [
    ("report",), ("report", "--runs", "--vs-published"), ("results", "list"), ("status",),
    ("status", CLUSTER), ("goodput", RUN), ("goodput", "--cluster", CLUSTER), ("goodput", "--by", "owner"),
    ("baseline", "list"), ("baseline", "show", "wide"), ("compare", "wide", "--since", "2000-01-01"),
    ("catalog",), ("recipes", "list"), ("plan", "llama2_70b_lora", "--sku", "h100", "--nodes", "1,2,4"),
]
# what each command must show whole (on one line), when it shows it at all
WHOLE = {
    ("report",): [f"v5.1/Dell/{DELL[0]}", f"v5.1/Dell/{DELL[1]}", NVIDIA, "llama2_70b_lora"],
    ("results", "list"): [*DELL, NVIDIA, "llama2_70b_lora"],
    ("status",): [RUN, CLUSTER],
    ("goodput", RUN): [RUN, "node_fail"],
    ("goodput", "--cluster", CLUSTER): [RUN, CLUSTER],
}


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_every_table_fits_and_cuts_no_name(home: Path, width: int, args: tuple[str, ...]) -> None:
    done = azbench_in_process(*args, home=home, env={"COLUMNS": str(width)})
    assert done.code in (0, 8), done.err  # compare: 8 is a regression, still printed
    lines = done.out.splitlines()
    assert lines, args
    wide = [line for line in lines if cell_len(line) > width]
    assert wide == [], "\n".join(wide)
    cut = [line for line in lines if "…" in line]
    assert cut == [], "\n".join(cut)
    for name in WHOLE.get(args, []):
        assert any(name in line for line in lines), f"{name} is not whole in `azbench {' '.join(args)}`"


def test_piped_output_is_100_columns_unless_columns_says(home: Path) -> None:
    """No COLUMNS, stdout a pipe: 100 columns (the run summary and goodput printed 200)."""
    done = azbench_in_process("goodput", RUN, home=home)
    assert done.code == 0, done.err
    assert max(cell_len(line) for line in done.out.splitlines()) <= 100
    evidence = [line for line in done.out.splitlines() if "evidence:" in line]
    assert evidence and "Slurm state node_fail" in " ".join(done.out.split())  # below the table


# -- conventions (issue 49, point 4) ---------------------------------------------------------


@pytest.mark.parametrize("args", [("results", "list"), ("catalog",), ("baseline", "show", "wide")])
def test_yaml_and_jsonc_are_the_json_form(home: Path, args: tuple[str, ...]) -> None:
    """-o yaml is the JSON form as YAML (key order kept); -o jsonc in a pipe is plain JSON."""
    import yaml

    as_json = azbench_in_process(*args, "-o", "json", home=home)
    as_yaml = azbench_in_process(*args, "-o", "yaml", home=home)
    as_jsonc = azbench_in_process(*args, "-o", "jsonc", home=home)
    assert (as_json.code, as_yaml.code, as_jsonc.code) == (0, 0, 0), as_yaml.err + as_jsonc.err
    data = json.loads(as_json.out)
    assert yaml.safe_load(as_yaml.out) == data
    assert json.loads(as_jsonc.out) == data
    queried = azbench_in_process(*args, "-o", "yaml", "--query", "length(@)", home=home)
    assert queried.code == 0 and yaml.safe_load(queried.out) == len(data)


def test_baseline_on_imported_logs_says_pass_since(tmp_path: Path) -> None:
    """Imported logs belong to no sweep: `baseline set` and `compare` with no selection say
    what selects them instead of "run a recipe first"."""
    home = tmp_path / "home"
    tree = _tree(tmp_path / "tree")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZBENCH_HOME", str(home))
        patch.delenv("AZBENCH_DB_URL", raising=False)
        with Store.open() as store:
            import_path(store, tree / "v5.1")
    done = azbench_in_process("baseline", "set", "b", "--yes", home=home)
    assert done.code == 2 and "imported results: pass --since DATE" in done.err
    assert "run a recipe first" not in done.err and len(done.err.splitlines()) == 1
    since = done.err.split("--since ")[2].split(",")[0]  # the example date it gives works
    assert azbench_in_process("baseline", "set", "b", "--since", since, "--yes", home=home).code == 0
    assert "imported results" in azbench_in_process("compare", "b", home=home).err
