"""The wheel carries templates/ and recipes/, so a non-editable install can run recipes."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

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
