"""Slurm: how azbench speaks to Slurm, and the only package that spells its commands.

Owns: slurm.conf rendering (conf), topology.conf for NVLink racks (topology), batch scripts (batch), every command line azbench sends
(commands), the Slurm state table with the job and node-list parsers (states), and the Slurm
launcher (launcher): the Launcher seam over a Runner. Everything but the launcher is pure.
May import: the base only.
Exposes: conf.render_slurm_conf, batch.render_sbatch, commands, states.map_state and parsers,
launcher.SlurmLauncher.
"""
