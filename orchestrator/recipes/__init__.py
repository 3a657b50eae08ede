"""Recipes: what can run, and how (knows nothing of Azure's APIs).

Owns: the recipe catalog (recipes/*.yaml loaded, resolved to a checked config for a SKU and
node count, rendered to its exact launch script) and parallel layouts (TP x PP x CP x DP, GBS
rules, NVLink-domain placement).
May import: the base, clusters.catalog (GPU facts) and slurm/ (batch scripts).
Exposes: catalog (get_recipe, resolve, render_launch, describe_launch), parallelism.
"""
