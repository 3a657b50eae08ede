"""Hardware: the GPU VM catalog and how nodes lay out on it, with no cloud calls.

Owns the sizes azbench knows, one row per size in sizes.yaml, validated by catalog.py (names and
the GPU type readers see, GPUs, vCPUs, InfiniBand, NVLink racks, images, list and spot prices with
their sources, peaks, NCCL baselines and network settings, the MLPerf accelerator names of each
size and of the accelerators no Azure size has), Azure region names (regions.py), and the layout
rules every Azure-shaped plan uses: nodes split into scale sets of at most N VMs, NVLink racks
whole (layout.py).
May import: the base only.
Exposes: catalog (lookup, find, CATALOG, GpuSku, NetworkProfile, by_accelerator,
size_in_system), regions (check_region), layout.
"""
