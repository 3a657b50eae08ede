"""Clusters: what a cluster is and how it comes and goes.

Owns: user specs (ClusterSpec, RunSpec, policies), the GPU VM catalog, region names, the
planner (scale sets, IB rules, cost per hour), the spending guards (confirmation summary, cost
cap), the up/down/status/extend use cases (lifecycle), the runners that execute commands on
cluster hosts (remote), the head-node shell of `azbench ssh` (shell), and providers/ (azure,
azureml, local, ssh, fake).
May import: the base (models, errors, paths, yamlio), slurm/ and store/.
Exposes: specs, catalog, planner, lifecycle, remote, providers.get_provider.
"""
