"""Results: from a log to numbers.

Owns: the MLLOG parser, ingesting one log into a ResultRow, importing submission trees, the
MLPerf compliance checker wrapper, the pure metrics (scores, step times, MFU, scaling, cost),
the one definition of every figure the views print (definitions: which runs, which precision,
when a figure is defined; docs/figures.md),
per-node stragglers (median and tolerance), a stored result's summary read back (the step
times that count), the archive of raw logs and store snapshots in Azure Blob Storage, and the
vendored table of published MLPerf Training results (recipes/published/). nccl-tests outputs and
NCCL logs are the fabric's (orchestrator/fabric/).
May import: the base, hardware.catalog, store/, and providers.azure_shared.signin and
providers.azure_shared.errors (the shared Azure sign-in and its one-line failure, for the Blob
archive; never a backend).
Exposes: mllog.parse, ingest, importer.import_path, compliance, metrics, summary,
archive.push/pull, files (regular files only, opened without blocking),
published.load_published/nearest/series/catalog_gpu, definitions (time_to_train,
step_time, mfu, strong_scaling, weak_scaling, sku_speedup, cost_per_result, cost_per_run,
published_neighbour).
"""
