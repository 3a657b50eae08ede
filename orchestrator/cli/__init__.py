"""The command line: the Typer app (`azbench`) and its command groups.

Owns: parsing flags, calling one use case per command, rendering tables or --json, and the one
error handler that maps AzbenchError to exit codes. Thin: no business logic here.
May import: the base, specs/, hardware/, clusters/, explain/, fabric/, forecast/, goodput/, pipelines/, recipes/,
report/, results/, runs/, store/, providers.base and providers.azure_shared (the sweep flags;
never a backend): it is the top floor. Heavy ones only inside commands, so `azbench --help`
stays fast.
Exposes: `main` (the console-script entry point `orchestrator.cli:main`).
"""

from orchestrator.cli.app import main

__all__ = ["main"]
