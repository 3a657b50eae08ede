"""Recipes: what can run, and how (knows nothing of Azure's APIs, nor of Slurm).

Owns: the recipe catalog (recipes/*.yaml loaded, resolved to a checked config for a SKU and
node count, and a recipe's per-node command) and parallel layouts (TP x PP x CP x DP, GBS
rules, NVLink-domain placement). The launch script a config becomes is runs/launch.py's.
May import: the base and hardware.catalog (GPU facts).
Exposes: catalog (get_recipe, resolve, render_command, check_request), parallelism.
"""
