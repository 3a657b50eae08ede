"""Clusters: what a cluster is and how it comes and goes.

Owns: user specs (ClusterSpec, RunSpec, policies), the GPU VM catalog, region names, the
planner (scale sets, IB rules, cost per hour), the spending guards (confirmation summary, cost
cap), the up/down/status/extend use cases and `connect` (lifecycle), the runners that execute
commands on cluster hosts (remote), the head-node shell of `azbench ssh` (shell), and
providers/: the registry, the Provider seam, and one folder per backend (azure, azureml,
local, ssh, fake), each of which connects its clusters to a launcher.
May import: the base, slurm/ and store/.
Exposes: specs, catalog, planner, lifecycle (up, down, connect, cluster_status), remote, providers.
"""
