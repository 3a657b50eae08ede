"""The VM catalog: one flat row per VM size, plus pure lookups by name or alias.

GPU sizes for benchmarks; general-purpose D*s_v5 sizes (no GPU, no InfiniBand) for the CPU dress
rehearsal of the whole Azure path for cents; and the local provider's emulated node.

Facts come from ../shared/docs/azure-notes.md (Microsoft size docs, azhpc-images). Prices are
list-price estimates (Linux pay-as-you-go) and always labelled as such, each row with where the
figure was read and when (`price_source`, `price_date`); peak FLOP/s are dense (never sparse) per
GPU, for MFU.
"""

from __future__ import annotations

import difflib

from orchestrator.errors import NotFoundError
from pydantic import Field

from orchestrator.models import Frozen

# Spot prices float by region, size and hour, so azbench plans with an assumed fraction of the
# pay-as-you-go list price and labels it so. Assumption, not a quote: 0.35 is a mid value of the
# 60-90% discounts Azure advertises for Spot VMs; the live figure is in the Azure Retail Prices
# API (prices.azure.com, meterName ending in " Spot") and the portal's spot pricing history.
SPOT_PRICE_FRACTION = 0.35
SPOT_PRICE_SOURCE = (f"assumed {SPOT_PRICE_FRACTION:.0%} of pay-as-you-go (spot prices vary; "
                     "Azure Retail Prices API has the live figure)")


_AIOA = ("github.com/Azure/ai-infrastructure-on-azure skills/ai-infra/references/sku_baselines.md "
         "(commit 6ac01e70)")
_AHC = "github.com/Azure/azurehpc-health-checks conf/{conf} (check_{check} {value} ... 16G)"
# Where list prices are read: the Azure Retail Prices API (no sign-in), one row per meter. azbench
# has not re-read these figures itself (no network where the catalog is built): each says whose
# copy of the API row it is and the date of that copy; `azbench report --price SKU=USD` overrides.
RETAIL_API = ("prices.azure.com/api/retail/prices?$filter=armSkuName eq '{sku}' and priceType eq "
              "'Consumption' (Linux pay-as-you-go)")


def _retail(sku: str, where: str) -> str:
    return f"Azure Retail Prices API row, {where}; query: {RETAIL_API.format(sku=sku)}"


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
    scope: str
    source: str

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


class GpuSku(Frozen):
    name: str
    short: str
    aliases: tuple[str, ...]
    gpu_model: str
    gpus_per_vm: int
    gpu_memory_gb: int
    vcpus: int
    ram_gib: int
    ib_links: int
    ib_gbps_per_link: int
    nvlink_domain_vms: int
    cpu_arch: str
    image: str
    quota_family: str
    price_per_hour_usd: float | None
    peak_tflops_bf16: float | None
    peak_tflops_fp8: float | None
    peak_tflops_fp4: float | None = None
    # Where the dense per-precision peaks come from (NVIDIA's datasheets list Tensor Core figures
    # "with sparsity": the dense figure is half).
    peak_source: str = ""
    expected_busbw_gbps: float | None = None
    nccl: NcclBaseline | None = None
    notes: str = ""
    price_source: str = Field("", description="where price_per_hour_usd was read, or why it is None")
    price_date: str = Field("", description="when that figure was read (YYYY-MM-DD); '' if undated")

    @property
    def is_azure_size(self) -> bool:
        """A size Azure rents (GPU or general purpose), as opposed to the local emulated node."""
        return self.name.startswith("Standard_")

    @property
    def ib_total_gbps(self) -> int:
        return self.ib_links * self.ib_gbps_per_link

    @property
    def price_per_gpu_hour_usd(self) -> float | None:
        if self.price_per_hour_usd is None or not self.gpus_per_vm:
            return None
        return self.price_per_hour_usd / self.gpus_per_vm

    def spot_price_per_hour_usd(self, max_price: float = -1.0) -> float | None:
        """Estimated spot price per VM-hour (SPOT_PRICE_FRACTION), capped by `max_price`."""
        if self.price_per_hour_usd is None:
            return None
        estimate = round(self.price_per_hour_usd * SPOT_PRICE_FRACTION, 2)
        return estimate if max_price == -1 else min(estimate, max_price)

    def peak_tflops(self, precision: str) -> float | None:
        return {"bf16": self.peak_tflops_bf16, "fp8": self.peak_tflops_fp8,
                "fp4": self.peak_tflops_fp4}.get(precision.lower())


_HOPPER_PEAKS = ("NVIDIA H100/H200 Tensor Core GPU datasheets (nvidia.com/en-us/data-center/h100, "
                 "/h200), SXM: BF16 1,979 and FP8 3,958 TFLOPS \"with sparsity\"; dense is half "
                 "(989.5 and 1,979; the catalog keeps 989 for BF16, as mlperf-notes 10.3); no FP4")
_GB200_PEAKS = ("NVIDIA GB200 NVL72 specifications (nvidia.com/en-us/data-center/gb200-nvl72), per GB200 "
                "superchip of 2 Blackwell GPUs: FP4 40, FP8/FP6 20, FP16/BF16 10 PFLOPS \"with sparsity\"; "
                "dense per GPU is a quarter: FP4 10,000, FP8 5,000, BF16 2,500 TFLOPS")
_HPC_IMAGE = "microsoft-dsvm:ubuntu-hpc:2204:latest"
# Plain Ubuntu 22.04 for the CPU sizes: no GPU/IB drivers to carry, same release as the HPC image.
_UBUNTU_IMAGE = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"


def _d_v5(vcpus: int, price: float) -> GpuSku:
    return GpuSku(
        name=f"Standard_D{vcpus}s_v5", short=f"D{vcpus}s v5", aliases=(f"d{vcpus}s_v5", f"d{vcpus}sv5"),
        gpu_model="none (CPU, gloo)", gpus_per_vm=0, gpu_memory_gb=0, vcpus=vcpus, ram_gib=4 * vcpus,
        ib_links=0, ib_gbps_per_link=0, nvlink_domain_vms=1, cpu_arch="x86_64", image=_UBUNTU_IMAGE,
        quota_family="standardDSv5Family", price_per_hour_usd=price,
        peak_tflops_bf16=None, peak_tflops_fp8=None,
        notes="CPU dress rehearsal of the Azure path (no GPU, no InfiniBand); price: eastus list estimate",
        price_source=_retail(f"Standard_D{vcpus}s_v5", "eastus, as copied in a third-party cloud price "
                             "comparison (D2s v5 $0.096, D4s v5 $0.192, D8s v5 $0.384; Dsv5 prices "
                             "scale linearly with vCPUs, so D16s v5 is $0.768)"),
        price_date="2026-04-20")

CATALOG: tuple[GpuSku, ...] = (
    GpuSku(
        name="Standard_ND96isr_H100_v5", short="ND H100 v5",
        aliases=("h100", "nd-h100-v5", "ndh100v5", "nd96isr_h100_v5"),
        gpu_model="H100 SXM 80GB", gpus_per_vm=8, gpu_memory_gb=80, vcpus=96, ram_gib=1900,
        ib_links=8, ib_gbps_per_link=400, nvlink_domain_vms=1, cpu_arch="x86_64",
        image=_HPC_IMAGE, quota_family="standardNDSH100v5Family", price_per_hour_usd=98.32,
        peak_tflops_bf16=989.0, peak_tflops_fp8=1979.0, peak_source=_HOPPER_PEAKS, expected_busbw_gbps=450.0,
        nccl=NcclBaseline(message="16G", expected_gbps=450.0, warn_gbps=400.0, replace_gbps=300.0,
                          scope="all_reduce_perf busbw, full sweep at 16G (node group)",
                          source=_AIOA + "; azurehpc-health-checks' single-node check is 460 GB/s: "
                          + _AHC.format(conf="nd96isr_h100_v5.conf", check="nccl_allreduce", value="460.0")),
        notes="price: eastus list estimate",
        price_source=_retail("Standard_ND96isr_H100_v5", "eastus, meter 'ND96isr H100 v5', as copied "
                             "in a third-party catalog of published GPU prices (the same $98.32 as "
                             "../shared/docs/azure-notes.md)"),
        price_date="2026-09-27",
    ),
    GpuSku(
        name="Standard_ND96isr_H200_v5", short="ND H200 v5",
        aliases=("h200", "nd-h200-v5", "ndh200v5", "nd96isr_h200_v5"),
        gpu_model="H200 141GB", gpus_per_vm=8, gpu_memory_gb=141, vcpus=96, ram_gib=1850,
        ib_links=8, ib_gbps_per_link=400, nvlink_domain_vms=1, cpu_arch="x86_64",
        image=_HPC_IMAGE, quota_family="standardNDISRH200V5Family", price_per_hour_usd=84.80,
        peak_tflops_bf16=989.0, peak_tflops_fp8=1979.0, peak_source=_HOPPER_PEAKS, expected_busbw_gbps=450.0,
        nccl=NcclBaseline(message="16G", warn_gbps=431.0, scope="single-node all_reduce_perf, 8 GPUs",
                          source=_AHC.format(conf="nd96isr_h200_v5.conf", check="nccl_allreduce",
                                             value="431.0") + " (no published expected figure)"),
        notes="price: eastus2 list estimate",
        price_source=_retail("Standard_ND96isr_H200_v5", "eastus2, meter 'ND96isr H200 v5', as copied "
                             "in a third-party catalog of published GPU prices; a second copy gives "
                             "the same $84.80 for westus3 (2026-04-20), a third list says $118.50 "
                             "(no region, no date): unverified, override with --price"),
        price_date="2026-09-27",
    ),
    GpuSku(
        name="Standard_ND128isr_NDR_GB200_v6", short="ND GB200 v6",
        aliases=("gb200", "nd-gb200-v6", "ndgb200v6", "nd128isr_ndr_gb200_v6"),
        gpu_model="GB200 Blackwell 192GB", gpus_per_vm=4, gpu_memory_gb=192, vcpus=128, ram_gib=900,
        ib_links=4, ib_gbps_per_link=400, nvlink_domain_vms=18, cpu_arch="arm64",
        image="arm64 Gen2 ubuntu-hpc (resolved at up time)",
        quota_family="standardNDISRGB200V6NDRFamily", price_per_hour_usd=108.16,
        peak_tflops_bf16=2500.0, peak_tflops_fp8=5000.0, peak_tflops_fp4=10000.0,
        peak_source=_GB200_PEAKS, expected_busbw_gbps=680.0,
        nccl=NcclBaseline(message="16G", warn_gbps=432.0, scope="single-node all_reduce_perf, 4 GPUs",
                          source=_AHC.format(conf="nd128isr_ndr_gb200_v6.conf", check="nccl_allreduce",
                                             value="432.0") + " (no published multi-node GB200 figure; "
                          "the runbook's MNNVL rack figure, 937 GB/s, is for GB300)"),
        notes="18 VMs = one NVL72 rack (NVLink domain); price: eastus list estimate",
        price_source=_retail("Standard_ND128isr_NDR_GB200_v6", "westus3 and eastus, as reproduced "
                             "by third parties and recorded in ../shared/docs/azure-notes.md "
                             "(unverified)"),
        price_date="",
    ),
    GpuSku(
        name="Standard_ND96isr_MI300X_v5", short="ND MI300X v5",
        aliases=("mi300x", "nd-mi300x-v5", "ndmi300xv5"),
        gpu_model="AMD MI300X 192GB", gpus_per_vm=8, gpu_memory_gb=192, vcpus=96, ram_gib=1850,
        ib_links=8, ib_gbps_per_link=400, nvlink_domain_vms=1, cpu_arch="x86_64",
        image="microsoft-dsvm:ubuntu-hpc:2204-rocm:latest", quota_family="standardNDISv5MI300XFamily",
        price_per_hour_usd=None, peak_tflops_bf16=1307.0, peak_tflops_fp8=2615.0,
        nccl=NcclBaseline(message="16G", warn_gbps=314.0, scope="single-node rccl all_reduce_perf, 8 GPUs",
                          source=_AHC.format(conf="nd96isr_mi300x_v5.conf", check="rccl_allreduce",
                                             value="314")),
        notes="not an MLPerf-recipe target yet; no public list price known",
        price_source="no copy of its Retail Prices API row found: cost shows as unknown "
                     "(give one with --price Standard_ND96isr_MI300X_v5=USD)",
    ),
    _d_v5(4, 0.192),
    _d_v5(8, 0.384),
    _d_v5(16, 0.768),
    GpuSku(
        name="Local_CPU", short="local CPU node",
        aliases=("local", "cpu"),
        gpu_model="none (CPU, gloo)", gpus_per_vm=0, gpu_memory_gb=0, vcpus=0, ram_gib=0,
        ib_links=0, ib_gbps_per_link=0, nvlink_domain_vms=1, cpu_arch="host",
        image="host", quota_family="", price_per_hour_usd=None,
        peak_tflops_bf16=None, peak_tflops_fp8=None,
        notes="an emulated Slurm node on this machine (--provider local)",
        price_source="an emulated node on this machine: nothing to price",
    ),
)

_BY_KEY: dict[str, GpuSku] = {}
for _row in CATALOG:
    for _key in (_row.name, _row.short, *_row.aliases):
        _BY_KEY[_key.lower().replace(" ", "-")] = _row


def lookup(name: str) -> GpuSku:
    """The row for a size name or alias (case-insensitive); NotFoundError with a suggestion."""
    key = name.strip().lower().replace(" ", "-")
    if key in _BY_KEY:
        return _BY_KEY[key]
    close = difflib.get_close_matches(key, list(_BY_KEY), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else "see `azbench catalog`"
    raise NotFoundError(f"unknown SKU '{name}'", hint=hint)


def find(name: str | None) -> GpuSku | None:
    """The row for a size name or alias (as `lookup`), or None for no name or an unknown one."""
    if not name:
        return None
    try:
        return lookup(name)
    except NotFoundError:
        return None


# GPU families as MLPerf system descriptions name accelerators ("NVIDIA H100-SXM5-80GB"), most
# specific first, mapped to the catalog size whose GPU that is.
_GPU_FAMILIES = (("gb200", "gb200"), ("h200", "h200"), ("h100", "h100"), ("mi300x", "mi300x"))


def gpu_row(name: str | None) -> GpuSku | None:
    """The catalog row for a VM size, alias or accelerator name (for its GPU facts), else None."""
    row = find(name)
    if row is not None or not name:
        return row  # a size or alias, or no name at all
    squashed = name.lower().replace(" ", "").replace("-", "")
    return next((lookup(alias) for token, alias in _GPU_FAMILIES if token in squashed), None)


def gpu_skus() -> list[GpuSku]:
    return [row for row in CATALOG if row.gpus_per_vm > 0]


def cpu_azure_skus() -> list[GpuSku]:
    """The general-purpose Azure sizes of the CPU dress rehearsal."""
    return [row for row in CATALOG if row.is_azure_size and row.gpus_per_vm == 0]
