"""Results: from a log to numbers.

Owns: the MLLOG parser, ingesting one log into a ResultRow, importing submission trees, the
MLPerf compliance checker wrapper, the pure metrics (scores, step times, MFU, scaling, cost),
per-node stragglers (median and tolerance) and a stored result's summary read back (the step
times that count).
May import: the base, clusters.catalog and store/.
Exposes: mllog.parse, ingest, importer.import_path, compliance, metrics, summary, files (regular
files only, opened without blocking).
"""
