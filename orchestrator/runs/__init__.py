"""Runs: a run's life on a cluster, through the cluster's Access (seams.py), never a provider.

Owns: sweeps of runs by node count and repeat (execute), one attempt (attempts), the health
gates (health: the all-reduce job; fleet, grouptest and fleet_gate: the scale gate behind
`azbench health` with its group testing, stragglers and drain; fleet_stats: its robust
statistics; fleet_replace: self-healing, replacing what it drained), the monitor and its decide(),
the failure-class table, recovery after a spot eviction (preemption), a run's logs (logview)
a recipe's launch script on Slurm (launch: the join of recipes/ and slurm/) and its staging
(prepare: data through MLCommons' R2 path, licence-gated items verified, the container built
into a squashfs named by the digest of its pinned implementation, then the READMEs' preprocessing
run in that container, each step marked by a key over its command and inputs).
May import: the base, specs/, hardware/, clusters/ (lifecycle for `connect`; never providers/), recipes/,
results/, slurm/ and store/.
Exposes: execute.run_sweep, attempts, health, fleet_gate.gate_cluster/gate_nodes,
fleet_replace.replace_drained, monitor,
failures, logview, launch.describe_launch/render_launch/render_stage_data/container_build,
prepare.prepare/check_staged.
"""
