"""Goodput: where every GPU-hour of a run and of a cluster went, and what it cost.

Owns: the categories and their typed breakdowns (model), the partition of a window into labelled
spans where the highest-priority source covering an instant names it and what no source covers is
`unattributed`, never spread over the others (timeline), a run's breakdown from its attempts, the
batch script's start and stop lines, its MLLOG and its failures with the lost work and restart
overhead each caused (run), a cluster's whole life weighted by the nodes each activity held, with
idle as what runs left free (cluster), and cost and goodput per owner from the store (owners).
Reads the store and the fetched logs; writes nothing; returns data, the CLI and the report draw it.
May import: the base, hardware.catalog, results/ and store/.
Exposes: run.run_goodput, cluster.cluster_goodput, cluster.one_line, owners.by_owner,
owners.spent, model (RunGoodput, ClusterGoodput, OwnerTotal, RUN_CATEGORIES, CLUSTER_CATEGORIES).
"""
