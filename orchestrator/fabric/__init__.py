"""The fabric: collectives measured, read back and judged, and the gate's fabric checks, in one home.

Owns: nccl-tests outputs read back (nccltests: one parser, wherever an output enters: `fabric
inspect`, `results import`, `fabric test` and the gate's rounds), NCCL_DEBUG=INFO logs read back
(nccl_log), the one judge (judge: a run's transport, wrong values and busbw against the catalog's
baseline, a gate round's busbw, and the gate's per-node facts), `fabric inspect` (inspection),
runs as stored rows and back (stored), the report's fabric lines and scaling (lines), `azbench
fabric test` (runner: the jobs through the cluster's Launcher, stored and judged) and the gate's
fabric checks on GPU nodes (gate: probe, judge, probe again), and `azbench fabric locate` (locate_plan:
the rounds and their judgement, pure; locate: the rounds through the Launcher). Batch scripts are slurm/'s
(slurm/fabric.py), the CLI is cli/fabric.py, the charts and the site page are report/'s.
May import: the base, hardware.catalog, store/, results.files (regular files, opened without
blocking) and slurm.conf (natural node order only; never a command).
Exposes: nccltests.parse_runs, nccl_log.parse_log, judge (run_checks, expected_for, round_busbw,
judge_nodes), inspection.inspect_files, stored (run_rows, import_nccl_tests), lines (fabric_lines,
fabric_scaling, fabric_section), runner.fabric_test, gate.gate_fabric, locate.locate, locate_plan.estimate.
"""
