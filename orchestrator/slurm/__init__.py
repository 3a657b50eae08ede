"""Slurm: how azbench speaks to Slurm, and the only package that spells its commands.

Owns: slurm.conf rendering (conf), topology.conf for NVLink racks (topology), every batch
script, each written from the typed job runs/ describes (models/): a plain attempt (batch), an
MLPerf attempt's pyxis container job (container), the health gate (health), the fabric test
(fabric) and the staging job (staging); every command line azbench sends (commands), the Slurm state table with the job and
node-list parsers (states), and the Slurm launcher (launcher): the Launcher seam over a Runner.
Everything but the launcher is pure.
May import: the base only.
Exposes: conf.render_slurm_conf, batch.render_sbatch, container.render_container_launch,
health.render_health_check, fabric.render_fabric_test, staging.render_stage, launcher.attempt_script (the script an
attempt becomes), commands, states.map_state and parsers, launcher.SlurmLauncher.
"""
