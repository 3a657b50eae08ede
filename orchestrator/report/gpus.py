"""Which GPU a result ran on: the GPU type a reader sees (the catalog row's `label`) and the
catalog size that has that GPU (its list price and peaks), from what a result row stores as its
`sku`.

A result's `sku` is a catalog size name for azbench's own runs and Azure submissions
("Standard_ND96isr_H100_v5"), and the system JSON's `accelerator_model_name` for other imported
results ("NVIDIA H100-SXM5-80GB", "NVIDIA Blackwell GPU (GB200)"). MLPerf names go through
the catalog's accelerator table (each size's `mlperf.accelerators`, and the accelerators listed
under no Azure size), the one tested table of every accelerator name in the published trees. A
name that table does not know is "unmapped": the match carries a warning naming the string, and
the GPU type is a best-effort short name, never a guessed catalog size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.hardware.catalog import (SIZES_FILE, GpuSku, by_accelerator, find, gpu_labels,
                                           no_azure_size)


@dataclass(frozen=True)
class GpuMatch:
    """`sku` as a GPU type. `row`: the catalog size with that GPU (None: no Azure size has it);
    `exact`: `sku` is that size itself, so nodes are its VMs; `note`: why there is no row."""

    sku: str | None
    label: str
    row: GpuSku | None = None
    exact: bool = False
    note: str = ""
    unmapped: bool = False  # a name the accelerator table does not know (a warning)


def match_gpu(sku: str | None) -> GpuMatch:
    """The GPU type and catalog size of a result's `sku` (see the module docstring)."""
    if not sku:
        return GpuMatch(None, "?", note="GPU unknown: the result names no SKU or accelerator")
    row = find(sku)
    if row is not None:
        return GpuMatch(sku, row.label, row, exact=row.name == sku)
    row = by_accelerator(sku)
    if row is not None:
        return GpuMatch(sku, row.label, row)
    if no_azure_size(sku) is not None:
        return GpuMatch(sku, short_label(sku),
                        note=f"no Azure size in the catalog has {sku}: no list price")
    return GpuMatch(sku, short_label(sku), unmapped=True,
                    note=f"unmapped accelerator '{sku}': not in the catalog's accelerator table "
                         f"({SIZES_FILE.name}), so no GPU type, list price or published neighbour")


def short_label(accelerator: str) -> str:
    """A short GPU name from an MLPerf accelerator name: a GPU name in brackets ("Blackwell GPU
    (GB200)" -> "GB200"), else the name without its vendor words, cut at the first dash after a
    model number ("B200-SXM-180GB" -> "B200"). A part whose short name would read like a catalog
    GPU's but is another part (PCIe, NVL, 96 GB) keeps its longer name ("H100-PCIe-80GB")."""
    plain = re.sub(r"\((R|TM)\)", "", accelerator).strip()
    inner = re.search(r"\(([A-Z]+[0-9][^)]*)\)", plain)
    text = inner[1] if inner else re.sub(
        r"^(NVIDIA|AMD|Intel|Habana)\s+(Instinct\s+|GeForce\s+)?", "", plain)
    words = text.split() or [accelerator]
    head = words[0].split("-")[0]
    label = head if re.search(r"[0-9]", head) else words[0]
    if not re.search(r"[0-9]", label) and len(words) > 1:
        label = " ".join(words[:2])  # "RTX A5000", not "RTX"
    if label in gpu_labels() and by_accelerator(accelerator) is None:
        label = text[:24].strip()
    return label

