"""The store: azbench's database of clusters, runs, attempts, results, events, baselines and
fabric results.

Owns: the schema with its forward migrations and row models (schema), and the typed reads and
writes over SQLite (WAL) or PostgreSQL (database).
May import: the base only.
Exposes: database.Store, schema's row models.
"""
