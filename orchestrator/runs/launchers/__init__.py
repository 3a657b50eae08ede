"""Launchers: how a run attempt becomes a scheduler job (Slurm, Azure ML)."""
