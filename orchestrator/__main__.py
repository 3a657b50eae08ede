"""`python -m orchestrator` runs the azbench CLI."""

from orchestrator.cli import main

main()
