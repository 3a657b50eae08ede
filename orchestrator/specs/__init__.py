"""Specs: what users write, checked. A cluster spec (cluster.py: name, provider, size, nodes,
region, tags and each backend's own section, validated by that backend's settings model through
the registry), a run spec with its retry and health policies (run.py), and the bounded values
both are built from (values.py: durations, node counts, numbers with their bounds in the message).
May import: hardware/ and the base.
Exposes: cluster (ClusterSpec, load_cluster_spec), run (RunSpec, RetryPolicy, HealthPolicy,
load_run_spec, parse_node_list), values.
"""
