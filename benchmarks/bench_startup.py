"""`azbench --help` start-up against its floors, measured in the same run, interleaved.

Figures (median wall seconds over REPEATS runs, each a new interpreter):
- `python_pass`: `python -c pass`, the interpreter alone;
- `import_typer`: `python -c "import typer"`, the floor of any Typer CLI;
- `azbench_help`: `python -m orchestrator --help` (the command modules stay unimported: the root
  lists them from cli/app.py's table);
- `help_with_every_command_module`: the same help after importing every command module, which
  is what `--help` would cost if cli/ imported its use cases eagerly (pydantic, SQLAlchemy,
  jinja2, numpy).
Each carries its ratio to `python_pass`, and the help its ratio to `import_typer`. Targets:
`azbench --help` within 1.5x of `import typer`, and under 0.3 s (bench_cli.py). Prints JSON
lines and never asserts. Run: python benchmarks/bench_startup.py [REPEATS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import emit  # noqa: E402

REPEATS = 11
HELP = ("import sys\nfrom orchestrator.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n")
EVERY_MODULE = ("import sys\nimport orchestrator.cli.app\nfrom orchestrator.cli.common import LAZY\n"
                "for entry in LAZY.values():\n    entry.load()\n" + HELP)
LOADED = HELP + ("print(','.join(sorted(m for m in sys.modules if m.startswith('orchestrator')"
                 " or m.split('.')[0] in ('pydantic', 'sqlalchemy', 'jinja2', 'numpy', 'yaml', 'rich'))),"
                 " file=sys.stderr)\n")


def _wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else REPEATS
    cases = {"python_pass": "pass", "import_typer": "import typer", "azbench_help": HELP,
             "help_with_every_command_module": EVERY_MODULE}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):  # interleaved: a busy moment slows every case alike
        for name, code in cases.items():
            times[name].append(_wall(code))
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, value in median.items():
        extra: dict[str, object] = {"best": round(min(times[name]), 4), "repeats": repeats,
                                    "ratio_vs_python": round(value / median["python_pass"], 2)}
        if name in ("azbench_help", "help_with_every_command_module"):
            extra["ratio_vs_typer"] = round(value / median["import_typer"], 2)
        if name == "azbench_help":
            extra["target"] = "<= 1.5x import_typer, < 0.3 s"
        emit(name, value, "s", **extra)
    loaded = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True).stderr
    emit("help_path_modules", len(loaded.strip().split(",")), "modules",
         modules=loaded.strip().split(","))


if __name__ == "__main__":
    main()
