"""The wheel carries templates/ and recipes/, so a non-editable install can run recipes."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_templates_and_recipes(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("azbench-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("orchestrator/_data/recipes/smoke.yaml", "orchestrator/_data/recipes/smoke/train.py",
                   "orchestrator/_data/recipes/llama31_405b.yaml",
                   "orchestrator/_data/recipes/published/training_results.csv",
                   "orchestrator/_data/templates/sbatch.sh.j2",
                   "orchestrator/_data/templates/slurm.conf.j2",
                   "orchestrator/_data/templates/cluster.example.yaml",
                   "orchestrator/_data/templates/report/base.html.j2",
                   "orchestrator/_data/templates/report/static/site.js",
                   "orchestrator/_data/templates/report/vendor/plotly-basic.min.js",
                   "orchestrator/_data/templates/report/vendor/LICENSE-plotly.js.txt",
                   "orchestrator/cli/app.py"):
        assert needed in names, needed
    entry = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry[0]).decode()
    assert "azbench = orchestrator.cli:main" in text
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


# -- the core install and its extras (issue 49) -------------------------------------------

EXCERPTS = ROOT / "tests" / "data" / "mlperf_excerpts"
NCCL = ROOT / "tests" / "data" / "nccl_excerpts" / "nccl-tests-214_sendrecv_perf_2node.txt"
# Distributions only an extra may bring: the core install must hold none of them.
EXTRA_ONLY = ("azure-identity", "azure-core", "azure-mgmt-compute", "azure-ai-ml",
              "azure-storage-blob", "paramiko", "cryptography", "tenacity", "torch", "psycopg")


def _tree(tmp_path: Path) -> Path:
    """A submission tree of one published log (an excerpt: it has no run_stop)."""
    bench = tmp_path / "tree" / "v5.1" / "NVIDIA" / "results" / "theia_ngpu512_ngc25.09_nemo" / "llama2_70b_lora"
    bench.mkdir(parents=True)
    (bench / "result_0.txt").write_bytes(
        (EXCERPTS / "v5.1_NVIDIA_theia_ngpu512_ngc25.09_nemo_llama2_70b_lora_result_0.txt").read_bytes())
    return tmp_path / "tree"


def _venv_size_mb(venv: Path) -> float:
    return sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


@pytest.mark.integration
def test_the_core_install_reads_results_and_writes_the_site(tmp_path):
    """`pip install <checkout>` into a fresh venv: at most 45 distributions and 420 MB, no cloud
    SDK, and import -> report -> site -> fabric inspect -> plan work; an Azure command names
    its extra in one line, exit 7. Dependencies come from pip's configured index and cache."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, capture_output=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-compile",
                           str(next(wheels.glob("*.whl")))],
                          capture_output=True, text=True, timeout=600)
    if done.returncode and any(s in done.stderr for s in ("No matching distribution",
                                                          "Could not find a version",
                                                          "NewConnectionError")):
        pytest.skip(f"no package index reachable: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], check=True,
                            capture_output=True, text=True).stdout.split()
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed}
    assert len(names) <= 45, sorted(names)
    assert not names & set(EXTRA_ONLY), sorted(names & set(EXTRA_ONLY))
    assert {"azbench", "typer", "rich", "pydantic", "sqlalchemy", "jinja2", "mlperf-logging"} <= names
    # without bytecode (--no-compile saves a minute here): 289 MB; compiled, as pip leaves it,
    # 399 MB (measured by hand, issue 49)
    assert _venv_size_mb(venv) <= 420, f"{_venv_size_mb(venv):.0f} MB"

    azbench = str(venv / "bin" / "azbench")
    env = {"AZBENCH_HOME": str(tmp_path / "home"), "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
           "COLUMNS": "100", "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([azbench, *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    imported = run("results", "import", str(_tree(tmp_path)))
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 result(s)" in imported.stdout
    report = run("report")
    assert report.returncode == 0, report.stderr
    assert "llama2_70b_lora" in report.stdout
    site = run("report", "--html", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr
    assert (tmp_path / "site" / "index.html").stat().st_size > 1000
    inspect = run("fabric", "inspect", str(NCCL))
    assert inspect.returncode in (0, 10), inspect.stderr  # 10: a verdict, not a crash
    assert "busbw" in inspect.stdout.lower() or "GB/s" in inspect.stdout
    plan = run("plan", "llama2_70b_lora", "--sku", "h100", "--nodes", "1,2")
    assert plan.returncode == 0, plan.stderr

    up = run("up", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastus",
             "--yes")
    assert up.returncode == 7, up.stderr
    assert up.stderr == ("azbench up --provider azure needs the Azure SDKs: "
                         "pip install 'azbench[azure]'\n")
    dry = run("up", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastus",
              "--dry-run")
    assert dry.returncode == 0, dry.stderr  # a plan is pure: no SDK needed


# A sitecustomize that hides modules, as a venv without the extra would: imports of them fail.
_BLOCKER = '''
import importlib.abc, os, sys
_HIDDEN = tuple(os.environ["AZBENCH_TEST_HIDE"].split(","))

class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in _HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
'''


def _run_hiding(tmp_path: Path, hide: str, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site-hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_BLOCKER)
    env = {"AZBENCH_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": f"{site}:{ROOT}", "AZBENCH_TEST_HIDE": hide,
           "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"}
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize(("hide", "args", "line"), [
    ("azure,paramiko,tenacity",
     ("up", "--provider", "azure", "--sku", "h100", "--nodes", "2", "--region", "eastus", "--yes"),
     "azbench up --provider azure needs the Azure SDKs: pip install 'azbench[azure]'"),
    ("azure.ai",
     ("up", "--provider=azureml", "--sku", "h100", "--nodes", "2", "--region", "eastus", "--yes"),
     "azbench up --provider azureml needs the Azure ML SDK: pip install 'azbench[azureml]'"),
    ("azure.storage",
     ("results", "push", "--account", "https://acct.blob.core.windows.net", "--container", "c"),
     "azbench results push needs the Azure Storage SDK: pip install 'azbench[blob]'"),
    ("azure,paramiko,tenacity", ("sweep", "--dry-run"),
     "azbench sweep (provider azure) needs the Azure SDKs: pip install 'azbench[azure]'"),
    ("torch", ("up", "--provider", "local", "--nodes", "2", "--yes"),
     "azbench up --provider local needs PyTorch: pip install 'azbench[local]'"),
    ("azure,paramiko,tenacity", ("adopt", "somecluster", "--provider", "azure"),
     "azbench adopt --provider azure needs the Azure SDKs: pip install 'azbench[azure]'"),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, hide, args, line):
    done = _run_hiding(tmp_path, hide, *args)
    assert (done.returncode, done.stderr) == (7, line + "\n")
    assert "Traceback" not in done.stdout


def test_without_extras_the_core_commands_still_run(tmp_path):
    """Help, a dry-run plan and the report need no extra."""
    hide = "azure,paramiko,tenacity,torch,psycopg"
    assert _run_hiding(tmp_path, hide, "--help").returncode == 0
    dry = _run_hiding(tmp_path, hide, "up", "--provider", "azure", "--sku", "h100", "--nodes", "2",
                      "--region", "eastus", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    imported = _run_hiding(tmp_path, hide, "results", "import", str(_tree(tmp_path)))
    assert imported.returncode == 0, imported.stderr
    report = _run_hiding(tmp_path, hide, "report")
    assert report.returncode == 0, report.stderr


def test_an_unguarded_import_of_an_extra_names_it():
    """The handler's fallback: a ModuleNotFoundError of an extra's module names the extra; one
    of no extra's (a bug) stays an internal error; the bare `azure` namespace names none."""
    from orchestrator.backends import missing_extra

    found = missing_extra(ModuleNotFoundError("x", name="azure.storage"))
    assert found is not None and found.extra == "blob"
    found = missing_extra(ModuleNotFoundError("x", name="paramiko"), "ssh")
    assert found is not None and found.extra == "ssh"
    assert missing_extra(ModuleNotFoundError("x", name="azure")) is None
    assert missing_extra(ModuleNotFoundError("x", name="no_such_thing")) is None
    with_backend = missing_extra(ModuleNotFoundError("x", name="azure"), "azureml", "--provider azureml")
    assert with_backend is not None and str(with_backend) == (
        "--provider azureml needs the Azure ML SDK: pip install 'azbench[azureml]'")
