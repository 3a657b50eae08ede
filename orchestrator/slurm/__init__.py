"""Slurm's formats, as pure functions: what azbench writes for Slurm and how it reads Slurm.

Owns: slurm.conf rendering (conf), batch scripts (sbatch), and the Slurm state table with the
sacct/squeue/sinfo parsers (states). No I/O and no cluster access: runs/launchers does that.
May import: the base only.
Exposes: conf.render_slurm_conf, sbatch.render_sbatch, states.map_state and parsers.
"""
