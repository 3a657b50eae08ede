"""The VM catalog: one row per VM size, read from sizes.yaml beside this module, and pure lookups.

A row (`GpuSku`) is the one home of a size: its names and the GPU type readers see, GPUs, memory
and vCPUs, InfiniBand, the NVLink domain and rack layout, image and quota family, list price
(with source and date), dense peaks per precision (with source), the health gate's NCCL
baselines, the NCCL network environment a job gets, and the MLPerf accelerator names and Azure
system-name patterns that are this size. GPU sizes for benchmarks; general-purpose D*s_v5 sizes
(no GPU, no InfiniBand) for the CPU dress rehearsal of the Azure path; the local provider's
emulated node. The file also lists every other accelerator of the published MLPerf trees as
"no Azure size", with why.

The file is validated once, at first use: every field of every row is required, and the table
as a whole must be unambiguous (no name, alias or accelerator twice; patterns that compile). A
broken file is a ConfigError naming file:line. An unknown size is a NotFoundError that names the
known ones. Prices are list-price estimates (Linux pay-as-you-go), labelled as such; peaks are
dense (never sparse) TFLOP/s per GPU, for MFU.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.models import Frozen
from orchestrator.yamlio import load_yaml, validation_error_to_config_error

# Spot prices float by region, size and hour, so azbench plans with an assumed fraction of the
# pay-as-you-go list price and labels it so. Assumption, not a quote: 0.35 is a mid value of the
# 60-90% discounts Azure advertises for Spot VMs; the live figure is in the Azure Retail Prices
# API (prices.azure.com, meterName ending in " Spot") and the portal's spot pricing history.
SPOT_PRICE_FRACTION = 0.35
SPOT_PRICE_SOURCE = (f"assumed {SPOT_PRICE_FRACTION:.0%} of pay-as-you-go (spot prices vary; "
                     "Azure Retail Prices API has the live figure)")

SIZES_FILE = Path(__file__).with_name("sizes.yaml")
AZURE_PREFIX = "Standard_"  # every size Azure rents is named Standard_<family>...


class NcclBaseline(Frozen):
    """A published all-reduce baseline for one VM size: nccl-tests all_reduce_perf at `message`
    bytes, `expected_gbps` bus bandwidth on a healthy node group, `warn_gbps` below which the
    group is re-tested and its bad member cornered (the health gate's threshold), and
    `replace_gbps` below which Azure's runbook drains and reports the node (Guest Health
    Reporting). `scope` says what the figure was measured over; `source` where it is published."""

    message: str = Field(pattern=r"^\d+[KMG]?$")
    expected_gbps: float | None = Field(None, gt=0)
    warn_gbps: float = Field(gt=0)
    replace_gbps: float | None = Field(None, gt=0)
    scope: str = Field(min_length=1)
    source: str = Field(min_length=1)

    @property
    def message_mb(self) -> float:
        """The message size in MB of 10^6 bytes (nccl-tests reads G as 2^30)."""
        units = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}
        text = self.message
        return (int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)) / 1e6

    @property
    def reference_gbps(self) -> float:
        """What a healthy group reaches: the expected figure, else the warn level."""
        return self.expected_gbps or self.warn_gbps

    @property
    def warn_fraction(self) -> float:
        return self.warn_gbps / self.reference_gbps


class NetworkProfile(Frozen):
    """Per-node NCCL/UCX/IB environment and host mounts a job gets on one VM size (empty, with
    the reason in `source`, where the size has no fabric to configure)."""

    env: dict[str, str]
    mounts: list[str]
    topo_file: str | None
    source: str = Field(min_length=1)


class MlperfNames(Frozen):
    """What MLPerf results call this size: `accelerators`, exact `accelerator_model_name`
    spellings of its GPU in system JSONs; `systems`, regular expressions (case-insensitive) that
    find the Azure size in a system id or name ("ND_H100_v5_n1344", "2048xAzure_GB200")."""

    accelerators: tuple[str, ...]
    systems: tuple[str, ...]
    source: str = Field(min_length=1)


class GpuSku(Frozen):
    """One VM size (sizes.yaml documents each field). Every field is required in the file."""

    name: str = Field(min_length=1)
    short: str = Field(min_length=1)
    label: str = Field(min_length=1, description="the GPU type a reader sees")
    aliases: tuple[str, ...]
    colour: str | None = Field(pattern=r"^#[0-9a-f]{6}$", description="the plots' colour for this GPU")
    gpu_model: str
    gpus_per_vm: int = Field(ge=0)
    gpu_memory_gb: int = Field(ge=0)
    vcpus: int = Field(ge=0)
    ram_gib: int = Field(ge=0)
    cpu_arch: str
    ib_links: int = Field(ge=0)
    ib_gbps_per_link: int = Field(ge=0)
    facts_source: str = Field(min_length=1)
    nvlink_domain_vms: int = Field(ge=1)
    rack_name: str = Field(description="what one multi-VM NVLink domain is called ('' without one)")
    rack_layouts: tuple[int, ...] = Field(description="VMs per rack a whole-rack layout may use")
    rack_source: str = Field(min_length=1)
    image: str
    quota_family: str
    aml_compute: bool = Field(description="`--provider azureml` may use this size (Azure ML's AmlCompute)")
    platform_source: str = Field(min_length=1)
    price_per_hour_usd: float | None = Field(gt=0)
    price_source: str = Field(min_length=1, description="where price_per_hour_usd was read, or why it is None")
    price_date: str = Field(pattern=r"^(\d{4}-\d{2}-\d{2})?$",
                            description="when that figure was read (YYYY-MM-DD); '' if undated")
    peak_tflops_bf16: float | None = Field(gt=0)
    peak_tflops_fp8: float | None = Field(gt=0)
    peak_tflops_fp4: float | None = Field(gt=0)
    # NVIDIA's datasheets list Tensor Core figures "with sparsity": the dense figure is half.
    peak_source: str = Field(min_length=1)
    expected_busbw_gbps: float | None = Field(gt=0)
    busbw_source: str = Field(min_length=1)
    nccl: NcclBaseline | None
    network: NetworkProfile
    mlperf: MlperfNames
    notes: str

    @property
    def is_azure_size(self) -> bool:
        """A size Azure rents (GPU or general purpose), as opposed to the local emulated node."""
        return self.name.startswith(AZURE_PREFIX)

    @property
    def key(self) -> str:
        """The size's key in the published-results table: its first alias ("h100")."""
        return self.aliases[0] if self.aliases else self.name.lower()

    def spot_price_per_hour_usd(self, max_price: float = -1.0) -> float | None:
        """Estimated spot price per VM-hour (SPOT_PRICE_FRACTION), capped by `max_price`."""
        if self.price_per_hour_usd is None:
            return None
        estimate = round(self.price_per_hour_usd * SPOT_PRICE_FRACTION, 2)
        return estimate if max_price == -1 else min(estimate, max_price)

    def peak_tflops(self, precision: str) -> float | None:
        return {"bf16": self.peak_tflops_bf16, "fp8": self.peak_tflops_fp8,
                "fp4": self.peak_tflops_fp4}.get(precision.lower())


class NoAzureSize(Frozen):
    """Published accelerators no catalog size has, and why."""

    why: str = Field(min_length=1)
    names: tuple[str, ...] = Field(min_length=1)


class SizesFile(Frozen):
    """sizes.yaml: `shared` texts rows cite through YAML anchors, the rows, the other accelerators."""

    shared: dict[str, Any] = Field(default_factory=dict)
    sizes: tuple[GpuSku, ...] = Field(min_length=1)
    no_azure_size: tuple[NoAzureSize, ...]


@dataclass(frozen=True)
class Catalog:
    """The validated table and its indexes."""

    rows: tuple[GpuSku, ...]
    by_key: dict[str, GpuSku]
    by_accelerator: dict[str, GpuSku]
    no_azure: dict[str, str]  # accelerator name -> why no catalog size has it
    systems: tuple[tuple[re.Pattern[str], GpuSku], ...]


def _norm(name: str) -> str:
    return name.strip().lower().replace(" ", "-")


@lru_cache(maxsize=8)
def load(path: Path = SIZES_FILE) -> Catalog:
    """The catalog in `path`, validated; ConfigError naming file:line for a broken file."""
    data, lines = load_yaml(path)
    try:
        parsed = SizesFile.model_validate(data)
    except ValidationError as exc:
        raise validation_error_to_config_error(exc, str(path), lines) from None
    return _index(parsed, path, lines)


def _index(parsed: SizesFile, path: Path, lines: dict[Any, int]) -> Catalog:
    def fail(loc: tuple[str | int, ...], message: str) -> ConfigError:
        line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
        return ConfigError(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    by_key: dict[str, GpuSku] = {}
    by_accelerator: dict[str, GpuSku] = {}
    systems: list[tuple[re.Pattern[str], GpuSku]] = []
    for i, row in enumerate(parsed.sizes):
        problem = _row_problem(row)
        if problem:
            raise fail(("sizes", i, problem[0]), f"{row.name}: {problem[1]}")
        for key in (row.name, row.short, *row.aliases):
            other = by_key.setdefault(_norm(key), row)
            if other is not row:
                raise fail(("sizes", i, "aliases"), f"'{key}' of {row.name} already names {other.name}")
        for name in row.mlperf.accelerators:
            other = by_accelerator.setdefault(name, row)
            if other is not row:
                raise fail(("sizes", i, "mlperf"), f"accelerator '{name}' already maps to {other.name}")
        for j, pattern in enumerate(row.mlperf.systems):
            try:
                systems.append((re.compile(pattern, re.IGNORECASE), row))
            except re.error as exc:
                raise fail(("sizes", i, "mlperf", "systems", j), f"mlperf.systems '{pattern}': {exc}") from None
    no_azure: dict[str, str] = {}
    for g, group in enumerate(parsed.no_azure_size):
        for n, name in enumerate(group.names):
            if name in by_accelerator or name in no_azure:
                where = by_accelerator[name].name if name in by_accelerator else "no_azure_size"
                raise fail(("no_azure_size", g, "names", n),
                           f"accelerator '{name}' is listed twice (also under {where})")
            no_azure[name] = group.why
    return Catalog(rows=parsed.sizes, by_key=by_key, by_accelerator=by_accelerator,
                   no_azure=no_azure, systems=tuple(systems))


def _row_problem(row: GpuSku) -> tuple[str, str] | None:
    """(field, what is wrong) where a row's fields disagree with each other, else None."""
    if row.gpus_per_vm and row.nccl is None:
        return "nccl", "a GPU size needs an nccl baseline"
    if (row.nvlink_domain_vms > 1) != bool(row.rack_layouts and row.rack_name):
        return "rack_layouts", "rack_name and rack_layouts go with nvlink_domain_vms > 1"
    full = row.nvlink_domain_vms
    if row.rack_layouts and (row.rack_layouts[0] != full or any(not 0 < v <= full for v in row.rack_layouts)):
        return "rack_layouts", f"rack_layouts start with the full rack ({full}) and hold no more"
    return None


def current() -> Catalog:
    """The catalog azbench uses (SIZES_FILE, read once)."""
    return load(SIZES_FILE)


def rows() -> tuple[GpuSku, ...]:
    """Every size, in the file's order."""
    return current().rows


def __getattr__(name: str) -> tuple[GpuSku, ...]:
    # CATALOG reads the file on first use, not at import: `azbench --help` stays fast.
    if name == "CATALOG":
        return rows()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def known_sizes() -> str:
    """The names `--sku` takes, one per size, for error messages."""
    return ", ".join(row.key for row in rows())


def lookup(name: str) -> GpuSku:
    """The row for a size name or alias (case-insensitive); NotFoundError naming the known ones."""
    table = current().by_key
    key = _norm(name)
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=1, cutoff=0.6)
    known = f"known: {known_sizes()}"
    hint = f"did you mean '{close[0]}'? {known}" if close else f"{known} (see `azbench catalog`)"
    raise NotFoundError(f"unknown SKU '{name}'", hint=hint)


def find(name: str | None) -> GpuSku | None:
    """The row for a size name or alias (as `lookup`), or None for no name or an unknown one."""
    if not name:
        return None
    return current().by_key.get(_norm(name))


def by_accelerator(name: str | None) -> GpuSku | None:
    """The row whose GPU an MLPerf `accelerator_model_name` is (exact spelling), else None."""
    return current().by_accelerator.get(name) if name else None


def no_azure_size(name: str | None) -> str | None:
    """Why no catalog size has accelerator `name` (a listed one), else None (mapped or unknown)."""
    return current().no_azure.get(name) if name else None


def accelerator_names() -> dict[str, str | None]:
    """Every accelerator name the catalog knows -> the key of its size, or None (no Azure size)."""
    cat = current()
    return {**{name: row.key for name, row in cat.by_accelerator.items()},
            **{name: None for name in cat.no_azure}}


def size_in_system(text: str) -> GpuSku | None:
    """The size an Azure system id or name names ("ND_H100_v5_n1344_pytorch" -> ND H100 v5)."""
    return next((row for pattern, row in current().systems if pattern.search(text)), None)


def gpu_row(name: str | None) -> GpuSku | None:
    """The catalog row for a size or alias, or for an MLPerf accelerator name (its GPU's size),
    else None: an accelerator the catalog lists under no size, or does not know."""
    return find(name) or by_accelerator(name)


def bare_name(sku: str) -> str:
    """A size name without Azure's "Standard_" prefix ("ND96isr_H100_v5"); other text as is."""
    return sku.removeprefix(AZURE_PREFIX)


def gpu_labels() -> set[str]:
    """The GPU types readers see for the catalog's GPU sizes ("H100", ...)."""
    return {row.label for row in gpu_skus()}


def colour_of(label: str) -> str | None:
    """The plots' colour of a GPU type (a GPU size's label), else None."""
    return next((row.colour for row in gpu_skus() if row.label == label and row.colour), None)


def gpu_skus() -> list[GpuSku]:
    return [row for row in rows() if row.gpus_per_vm > 0]


def aml_compute_skus() -> list[GpuSku]:
    """The sizes `--provider azureml` may use (rows marked `aml_compute`), in file order."""
    return [row for row in rows() if row.aml_compute]


def cpu_azure_skus() -> list[GpuSku]:
    """The general-purpose Azure sizes of the CPU dress rehearsal."""
    return [row for row in rows() if row.is_azure_size and row.gpus_per_vm == 0]
