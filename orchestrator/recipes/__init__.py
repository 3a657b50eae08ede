"""Recipes: what can run, and how (knows nothing of Azure's APIs, nor of Slurm).

Owns: the recipe catalog (recipes/*.yaml loaded, resolved to a checked config for a SKU and
node count, and a recipe's per-node command), a recipe's data items (data: what prepare stages
and where a job mounts it), the vendored submission configs (configs) and parallel layouts
(TP x PP x CP x DP, GBS rules, NVLink-domain placement from the rank order: rank_order). The launch script a config becomes is runs/launch.py's.
May import: the base, hardware.catalog (GPU facts) and hardware.layout (the rack size a plan
builds, for placement notes).
Exposes: catalog (get_recipe, resolve, render_command, check_request, data_for), data.DataItem,
configs, parallelism, rank_order.
"""
