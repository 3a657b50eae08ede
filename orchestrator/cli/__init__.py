"""The command line: the Typer app (`azbench`) and its command groups.

Owns: parsing flags, calling one use case per command, rendering tables or --json, and the one
error handler that maps AzbenchError to exit codes. Thin: no business logic here.
May import: the base, specs/, hardware/, clusters/, explain/, fabric/, forecast/, goodput/, pipelines/, recipes/,
report/, results/, runs/, store/, providers.base and providers.azure_shared (the sweep flags;
never a backend): it is the top floor. Heavy ones only inside commands, so `azbench --help`
stays fast.

Why an import sits inside a command (each says `# lazy: +WHAT on --help`): the help path loads
typer and cli/ only. Measured (python -X importtime and best-of-5 timed imports after `import
orchestrator.cli`, issue 44, on a loaded 2-core machine where the help path took 0.95 s): a use
case's module pulls pydantic (orchestrator.models: +1.3 s), SQLAlchemy (store.database: +3.2 s),
numpy or jinja2 (report.build: +3.9 s), each more than doubling `azbench --help`
(benchmarks/bench_cli.py: target 0.3 s, best 0.30 s). Imports of the light base (errors, paths,
safetext, cli.common) sit at the top of each module.
Exposes: `main` (the console-script entry point `orchestrator.cli:main`).
"""

from orchestrator.cli.app import main

__all__ = ["main"]
