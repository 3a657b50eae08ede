"""Runs: a run's life on a cluster, through the cluster's Access (seams.py), never a provider.

Owns: sweeps of runs by node count and repeat (execute), one attempt (attempts), the health
gates (health: the all-reduce job; fleet, grouptest and fleet_gate: the scale gate behind
`azbench health` with its group testing, stragglers and drain; fleet_stats: its robust
statistics, calling fabric/'s gate checks and judge on GPU nodes; fleet_replace: self-healing,
replacing what it drained), the monitor and its decide(),
the failure-class table, recovery after a spot eviction (preemption), a run's logs (logview),
a recipe's attempt and staging job as data for the launcher (launch: the join of recipes/ and
the job models; its previews ask slurm/ for the exact scripts), the rehearsal of every MLPerf
job against its implementation's own paths (rehearsal: PATHS.txt checked offline), and `azbench
prepare` (prepare: data
through MLCommons' R2 path, licence-gated items verified, the container built into a squashfs
named by the digest of its pinned implementation, then the READMEs' preprocessing run in that
container, each step marked by a key over its command and inputs). runs/ hands the launcher
data, never script text.
May import: the base, specs/, hardware/, clusters/ (lifecycle for `connect`; never providers/), recipes/,
results/, fabric/, slurm/ and store/.
Exposes: execute.run_sweep, attempts, health, fleet_gate.gate_cluster/gate_nodes,
fleet_replace.replace_drained, monitor,
failures, logview, launch.describe_launch/launch_attempt/container_run/stage_request/container_build,
prepare.prepare/check_staged/stage_plans, rehearsal.rehearse/rehearse_all.
"""
