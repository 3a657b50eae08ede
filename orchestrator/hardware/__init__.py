"""Hardware: the GPU VM catalog and how nodes lay out on it, with no cloud calls.

Owns the sizes azbench knows (GPUs, vCPUs, InfiniBand, NVLink domains, images, list and spot
prices with their sources, per-size performance baselines: catalog.py), Azure region names
(regions.py), and the layout rules every Azure-shaped plan uses: nodes split into scale sets of
at most N VMs, GB200 in whole racks (layout.py).
May import: the base only.
Exposes: catalog (lookup, CATALOG, GpuSku), regions (check_region), layout.
"""
