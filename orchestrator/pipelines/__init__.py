"""Pipelines: scheduled, non-interactive benchmarking.

Owns: the pipeline spec, the up -> health -> runs -> report -> compare -> down use case with
teardown on every exit path, its progress record, what its results mean, performance baselines
and comparison, the metric history against the active baseline (for the report site), the
archive push after the report, and JUnit XML.
May import: the base, specs/, hardware/, clusters/, goodput/, recipes/, report/, results/, runs/ and store/
(never slurm/: Slurm is reached through runs' launchers).
Exposes: pipeline.run_pipeline, spec.load_pipeline_spec, baselines, history, junit.
"""
