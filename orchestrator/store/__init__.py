"""The store: azbench's database of clusters, runs, attempts, results, events, baselines and
fabric results.

Owns: the schema with its forward migrations and row models (schema), the event row and the
typed payload of each event kind (events), the connection to SQLite (WAL) or PostgreSQL (engine), and the typed reads
and writes by table family (records: clusters, runs, attempts, events; measurements: results,
fabric results, baselines), which database.Store puts together.
May import: the base only.
Exposes: database.Store, schema's row models, events' payload models.
"""
