"""The command line: the Typer app (`azbench`) and its command groups.

Owns: parsing flags, calling one use case per command, rendering tables or --json, and the one
error handler that maps AzbenchError to exit codes. Thin: no business logic here.
May import: the base, specs/, hardware/, clusters/, explain/, fabric/, forecast/, goodput/, pipelines/, recipes/,
report/, results/, runs/, store/, providers.base and providers.azure_shared (the sweep flags;
never a backend): it is the top floor.

Start-up: `azbench --help` loads typer and cli.app, cli.common and the light base only
(benchmarks/bench_startup.py). The root group lists every command from cli/app.py's table and
imports a command's module (clusters, catalog, recipes, run, report, results, health, resize,
plan, goodput, explain, pipeline, fabric) only when that command runs, so each of them imports
its use cases at module level. Measured with python -X importtime after `import
orchestrator.cli` (issue 44, 2 cores): a use case's module pulls pydantic models (+0.1-0.2 s),
SQLAlchemy (store.schema: +0.25 s), jinja2 or numpy (+0.06-0.1 s each) on a help path of 0.15 s.
The imports left inside functions say `# lazy: +WHAT` with that cost: the loaders in cli/app.py,
`open_store`, the error path's `missing_extra`, and the few SQLAlchemy use cases of commands
whose module also serves a command that opens no store (`up --dry-run`, `fabric inspect`,
`recipes list`; tests/test_lazy_imports.py holds them to it).
Exposes: `main` (the console-script entry point `orchestrator.cli:main`).
"""

from orchestrator.cli.app import main

__all__ = ["main"]
