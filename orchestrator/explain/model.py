"""The step-time model: one training step of a Megatron-style LLM job split into the parts that
add up to it, each from the config, the hardware row and the links its parallel groups span.

Formulas (each cited where it is used):
- FLOPs per token: 6N + 12·L·h·s for pre-training (6N: Kaplan et al. 2020, "Scaling Laws for
  Neural Language Models" §2.1; 12·L·h·s attention scores and values: Chowdhery et al. 2022,
  "PaLM", Appendix B), as results/ counts MFU (models.ModelFacts). A frozen base (LoRA) runs the
  forward (2N) and the activation-gradient backward (2N) but no weight gradient: 4N + 2·N_train.
  The weight GEMMs run at the dense peak of the run's precision; attention runs in its own
  kernel (FlashAttention / cuDNN fused attention) on BF16 tensor cores, causal, so 6·L·h·s at
  the BF16 peak with its own achieved share (FP8_DPA is not costed apart: docs/explain.md).
- Memory-bound work (norms, activations, residual adds, casts): tokens x layers x hidden per
  GPU, in proportion to the dense peak at the run's precision (scaling it by HBM bandwidth
  instead fit the published steps worse: docs/explain.md).
- Pipeline bubble: (PP − 1) / (VP · m) of the pipeline's work, m the microbatches per step
  (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", §2.2: interleaved schedule).
- Collectives (nccl-tests doc/PERFORMANCE.md, "bus bandwidth"): all-reduce moves 2(n−1)/n of
  its buffer over each rank's link, all-gather and reduce-scatter (n−1)/n, so a ring takes
  size·factor / busbw. A group that spans D NVLink domains with k members in each is costed in
  two levels (the intra-domain ring on NVLink busbw, then 1/k of the data between domains on
  the InfiniBand rate per GPU), plus a latency of α per ring step on each level.
- Tensor parallel with sequence parallelism: per layer and microbatch 2 all-gathers and 2
  reduce-scatters of the layer's activations forward and the same backward (Korthikanti et al.
  2022, "Reducing Activation Recomputation in Large Transformer Models", §4.2.2).
- Context parallel (ring attention): (CP − 1) key/value blocks pass each rank per layer forward,
  twice that backward (keys, values and their gradients).
- Distributed optimizer: gradients reduce-scattered and parameters all-gathered over the
  data-parallel (x context-parallel) group, each rank keeping 1/(DP·CP) of the optimizer state
  (Megatron-LM docs, "Distributed Optimizer").
  Overlapped, they expose one chunk: "The DP communication is chunked by the granularity of a
  Transformer layer and overlaps each communication chunk with computation. This overlap method
  exposes only one DP communication chunk ... When training with pipeline parallelism, the
  granularity of DP communication becomes the Transformer layers per virtual pipeline stage"
  (NVIDIA Megatron Bridge docs, "Communication Overlap", Data-parallel Communication Overlap,
  https://docs.nvidia.com/nemo/megatron-bridge/latest/training/communication-overlap.html).
  The chunks go out in order on one stream, each when the last microbatch's backward has made
  its gradients, and overlap the backward that follows: with n chunks of c seconds each and b
  seconds of backward between two chunks' gradients, the queue outlasts the backward by
  c + (n − 1)·max(0, c − b): one chunk when the network keeps up (the page's claim), more when
  it does not. n = VP with PP (b: the backward of min(PP, m) microbatch-chunks, Megatron's
  interleaved schedule runs PP microbatches of one chunk together), the rank's layers without
  (b: one layer's backward of the last microbatch); backward = 2/3 of the compute. The fitted
  dp exposure (an overlap efficiency, at most 1) scales it. A collective the config does not
  overlap (OVERLAP_GRAD_REDUCE or OVERLAP_PARAM_GATHER False: Megatron then runs it after the
  backward, or before the forward, as one call) is exposed whole, with no parameter.

Each part is a base time (what it would take with nothing overlapped and the GPU at peak) times
one fitted parameter (fit.py), so the model is linear in its parameters but for exposed DP, which
also reads the achieved compute: `terms()` gives the base times, `predict()` applies the
parameters. Pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from orchestrator.recipes.rank_order import DEFAULT_ORDER, spans

COMPONENTS = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_bubble", "pp_p2p", "dp_comm",
              "optimizer", "other")
ACT_BYTES = 2  # BF16 activations between layers (Transformer Engine keeps them in BF16)
GRAD_BYTES = 2  # BF16 gradient buckets (Megatron's default, grad_reduce_in_fp32 off)
# Adam step on the rank's shard: read FP32 master, m, v and the gradient, write master, m, v and
# the BF16 copy: 4·3 + 2 + 4·3 + 2 bytes per parameter.
OPT_BYTES_PER_PARAM = 28
# Not derivable from a catalog row; azbench's assumptions, replaced by a stored fabric test:
IB_EFFICIENCY = 0.85  # the share of the InfiniBand line rate a collective reaches between domains
ALPHA_NVLINK_S = 5e-6  # latency per ring step inside an NVLink domain
ALPHA_IB_S = 10e-6  # latency per ring step between domains


@dataclass(frozen=True)
class Arch:
    """What the model needs of a network beyond ModelFacts: the key/value width (grouped-query
    attention) that context parallelism moves."""

    kv_dim: int
    source: str


# Benchmark -> architecture facts the recipes' ModelFacts do not carry.
ARCH: dict[str, Arch] = {
    "gpt3": Arch(12288, "Brown et al. 2020 Table 2.1: 96 heads x 128, multi-head attention"),
    "llama2_70b_lora": Arch(1024, "Touvron et al. 2023 (Llama 2) §2.2: GQA, 8 KV heads x 128"),
    "llama31_8b": Arch(1024, "Dubey et al. 2024 Table 3: 8 KV heads x 128"),
    "llama31_405b": Arch(1024, "Dubey et al. 2024 Table 3: 8 KV heads x 128"),
}


@dataclass(frozen=True)
class Hardware:
    """What the model reads of a catalog row (or of a stored fabric test)."""

    peak_tflops: float  # dense, at the run's GEMM precision
    gpus_per_node: int
    domain_nodes: int  # VMs (nodes) per NVLink domain: 1 on 8-GPU boards, 18 on NVL72
    nvlink_busbw_gbs: float  # all-reduce busbw inside one domain (GB/s per GPU)
    ib_gbs_per_gpu: float  # InfiniBand line rate per GPU (GB/s)
    inter_busbw_gbs: float | None = None  # a stored cross-domain busbw, when one is measured
    bf16_peak_tflops: float | None = None  # dense BF16: where attention runs (None: the run's peak)
    source: str = ""
    inter_source: str = "estimate"  # where inter_gbs comes from (the row, a fabric test, a flag)

    @property
    def inter_gbs(self) -> float:
        return self.inter_busbw_gbs or self.ib_gbs_per_gpu * IB_EFFICIENCY


@dataclass(frozen=True)
class StepConfig:
    """One run's effective config, as the model reads it."""

    benchmark: str
    params: float
    layers: int
    d_model: int
    seq_len: int
    gbs: int
    mbs: int
    gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    vp: int = 1
    ep: int = 1
    precision: str = "bf16"
    trainable_params: float | None = None
    tp_overlap: bool = True
    fp8_param_gather: bool = False
    # Megatron's DDP switches (OVERLAP_GRAD_REDUCE, OVERLAP_PARAM_GATHER); off, that collective
    # runs after the backward (before the forward) with nothing to hide it: exposed whole
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    order: str = DEFAULT_ORDER

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def microbatches(self) -> int:
        """m: microbatches each pipeline runs per step (GBS / (DP·MBS))."""
        return max(1, self.gbs // (self.dp * self.mbs))

    def problem(self) -> str | None:
        """Why the model cannot take this config, or None."""
        mp = self.tp * self.pp * self.cp
        if self.gpus < mp or self.gpus % mp:
            return f"{self.gpus} GPUs are not a multiple of TP*PP*CP = {mp}"
        if self.benchmark not in ARCH:
            return f"no architecture facts for '{self.benchmark}'"
        return None


def flops_per_token(c: StepConfig) -> float:
    """Training FLOPs per token: 6N + 12·L·h·s, or 4N + 2·N_train + 12·L·h·s with a frozen base."""
    attention = 12.0 * c.layers * c.d_model * c.seq_len
    if c.trainable_params is not None:
        return 4.0 * c.params + 2.0 * c.trainable_params + attention
    return 6.0 * c.params + attention


def gemm_flops_per_token(c: StepConfig) -> float:
    """The weight GEMMs' FLOPs per token, at the run's precision: 6N, or 4N + 2·N_train."""
    return flops_per_token(c) - 12.0 * c.layers * c.d_model * c.seq_len


def attention_flops_per_token(c: StepConfig) -> float:
    """Causal attention's FLOPs per token as they run: 6·L·h·s (scores and values, forward and
    backward, half of PaLM's 12·L·h·s: a causal kernel skips the masked half)."""
    return 6.0 * c.layers * c.d_model * c.seq_len


def bubble_fraction(pp: int, vp: int, microbatches: int) -> float:
    """(PP − 1) / (VP · m): the interleaved 1F1B schedule's idle share of the pipeline's work."""
    return (pp - 1) / (max(vp, 1) * max(microbatches, 1)) if pp > 1 else 0.0


def dp_chunks(c: StepConfig) -> int:
    """How many chunks Megatron's overlapped DP communication is cut into, one of them exposed
    (module docstring): the virtual pipeline stages with PP, else the rank's layers."""
    return max(c.vp, 1) if c.pp > 1 else max(1, c.layers // c.pp)


def _dp_overlap(c: StepConfig) -> float:
    """b as a share of the step's compute (module docstring): 2/3 (backward) of one microbatch-
    chunk's share, times the min(PP, m) microbatches run per chunk with PP, of one layer without."""
    m = c.microbatches
    if c.pp > 1:
        return 2.0 / 3.0 * min(c.pp, m) / (m * max(c.vp, 1))
    return 2.0 / 3.0 / (m * dp_chunks(c))


def exposed_dp(t: "Terms", compute_s: float) -> float:
    """The DP seconds left after overlap with `compute_s` of achieved compute (before the fitted
    exposure): c + (n − 1)·max(0, c − b), c = dp_raw / n, b = dp_overlap·compute_s."""
    chunk = t.dp_raw / t.dp_chunks
    return chunk + (t.dp_chunks - 1) * max(0.0, chunk - t.dp_overlap * compute_s)


def ring_time(size_bytes: float, n: int, busbw_gbs: float, factor: str = "ag",
              alpha_s: float = 0.0) -> float:
    """A ring collective over n ranks (nccl-tests PERFORMANCE.md): all_reduce ("ar") moves
    2(n−1)/n of `size_bytes` per rank, all_gather/reduce_scatter ("ag") (n−1)/n; plus α per step."""
    if n <= 1:
        return 0.0
    share = (2.0 if factor == "ar" else 1.0) * (n - 1) / n
    steps = (2 if factor == "ar" else 1) * (n - 1)
    return size_bytes * share / (busbw_gbs * 1e9) + steps * alpha_s


def group_time(size_bytes: float, n: int, domains: int, hw: Hardware, factor: str = "ag") -> float:
    """A collective over n ranks spread over `domains` NVLink domains: the intra-domain ring over
    k = n/domains members on NVLink, then 1/k of the data between the domains on InfiniBand."""
    domains = max(1, min(domains, n))
    k = max(1, n // domains)
    inner = ring_time(size_bytes, k, hw.nvlink_busbw_gbs, factor, ALPHA_NVLINK_S)
    outer = ring_time(size_bytes / k, domains, hw.inter_gbs, factor, ALPHA_IB_S)
    return inner + outer


def inter_rate_from_busbw(busbw_gbs: float, ranks: int, domains: int, hw: Hardware) -> float | None:
    """The cross-domain rate (GB/s per GPU) a measured busbw of a large collective over `ranks`
    ranks in `domains` NVLink domains implies, by group_time's two levels without latency:
    (n−1)/n / busbw = (k−1)/k / B_nvlink + (D−1)/D / (k · B_inter). None when it implies nothing
    (one domain, or a busbw the NVLink level alone would not allow)."""
    n, domains = ranks, max(1, min(domains, ranks))
    if domains <= 1 or busbw_gbs <= 0:
        return None
    k = max(1, n // domains)
    rest = (n - 1) / n / busbw_gbs - (k - 1) / k / hw.nvlink_busbw_gbs
    return (domains - 1) / domains / k / rest if rest > 0 else None


def p2p_time(size_bytes: float, cross: bool, hw: Hardware) -> float:
    """One send/receive between two ranks: on NVLink (busbw is the per-GPU rate) or InfiniBand."""
    rate = hw.inter_gbs if cross else hw.nvlink_busbw_gbs
    return size_bytes / (rate * 1e9) + (ALPHA_IB_S if cross else ALPHA_NVLINK_S)


@dataclass
class Terms:
    """The base times of one config (seconds): the model's parts before the fitted parameters,
    and what each group spans."""

    compute: float  # FLOPs at dense peak, no bubble
    elementwise: float  # token x layer x hidden elements per GPU (memory-bound work), in units of 1e9
    bubble_fraction: float
    tp_raw: float
    cp_raw: float
    pp_raw: float
    dp_raw: float  # the DP collectives the config overlaps (exposed_dp says how much shows)
    dp_chunks: int  # n: how many chunks the overlapped DP collectives go out in
    dp_overlap: float  # b / the step's achieved compute: the backward between two chunks' gradients
    opt_bytes: float
    attention: float = 0.0  # causal attention's 6·L·h·s FLOPs at the BF16 peak
    dp_serial: float = 0.0  # the DP collectives the config does not overlap: on the critical path whole
    domains: dict[str, int] = field(default_factory=dict)
    leaves_domain: list[str] = field(default_factory=list)


@lru_cache(maxsize=4096)
def terms(c: StepConfig, hw: Hardware) -> Terms:
    """The base time of every part of one step of `c` on `hw`."""
    tokens = float(c.gbs) * c.seq_len
    compute = tokens * gemm_flops_per_token(c) / (c.gpus * hw.peak_tflops * 1e12)
    attention = (tokens * attention_flops_per_token(c)
                 / (c.gpus * (hw.bf16_peak_tflops or hw.peak_tflops) * 1e12))
    sizes = {"tp": c.tp, "cp": c.cp, "pp": c.pp, "dp": c.dp}
    found = spans(sizes, c.order, max(hw.gpus_per_node, 1), max(hw.domain_nodes, 1))
    domains = {d: (s.racks if hw.domain_nodes > 1 else s.nodes) for d, s in found.items()}
    m, layers_here = c.microbatches, c.layers / c.pp
    act = c.mbs * (c.seq_len / c.cp) * c.d_model * ACT_BYTES
    tp_raw = 8 * layers_here * m * group_time(act, c.tp, domains["tp"], hw) if c.tp > 1 else 0.0
    kv = 2 * c.mbs * (c.seq_len / c.cp) * ARCH[c.benchmark].kv_dim * ACT_BYTES
    cp_raw = (3 * (c.cp - 1) * layers_here * m * p2p_time(kv, domains["cp"] > 1, hw)
              if c.cp > 1 else 0.0)
    pp_raw = (2 * m * max(c.vp, 1) * p2p_time(act / c.tp, domains["pp"] > 1, hw)
              if c.pp > 1 else 0.0)
    trainable = c.trainable_params if c.trainable_params is not None else c.params
    per_rank = trainable / (c.tp * c.pp)
    dp_n = c.dp * c.cp  # Megatron reduces gradients over the data-and-context-parallel group
    dp_domains = max(1, domains["dp"] * (domains["cp"] if domains["cp"] > 1 else 1))
    reduce_scatter = group_time(per_rank * GRAD_BYTES, dp_n, dp_domains, hw)
    all_gather = group_time(per_rank * (1 if c.fp8_param_gather else 2), dp_n, dp_domains, hw)
    dp_raw = (reduce_scatter if c.overlap_grad_reduce else 0.0) + (all_gather if c.overlap_param_gather else 0.0)
    dp_serial = (0.0 if c.overlap_grad_reduce else reduce_scatter) + (0.0 if c.overlap_param_gather else all_gather)
    opt_bytes = per_rank / dp_n * OPT_BYTES_PER_PARAM
    leaves = [d for d in ("tp", "cp", "pp", "dp") if sizes[d] > 1 and domains[d] > 1]
    # scaled by the peak: memory-bound work speeds up with the GPU generation as its FLOPs do
    elementwise = tokens * c.layers * c.d_model / c.gpus / hw.peak_tflops / 1e6
    return Terms(compute=compute, elementwise=elementwise, bubble_fraction=bubble_fraction(c.pp, c.vp, m), tp_raw=tp_raw,
                 cp_raw=cp_raw, pp_raw=pp_raw, dp_raw=dp_raw, dp_serial=dp_serial,
                 dp_chunks=dp_chunks(c), dp_overlap=_dp_overlap(c), opt_bytes=opt_bytes, attention=attention,
                 domains=domains, leaves_domain=leaves)


@dataclass(frozen=True)
class Params:
    """The fitted parameters (fit.py says where each came from): `slowdown` = 1/achieved share of
    peak for this config's (accelerator, precision); `elementwise_s` the memory-bound seconds per
    1e6 token x layer x hidden elements per TFLOP/s of peak; exposures = the share of a raw
    collective left on the critical path after overlap; `opt_s_per_gb` the optimizer's seconds
    per GB moved; `other_s` a fixed per-step remainder."""

    slowdown: float
    elementwise_s: float
    tp_exposed: float
    tp_exposed_plain: float
    cp_exposed: float
    pp_exposed: float
    dp_exposed: float
    opt_s_per_gb: float
    other_s: float
    attention_slowdown: float = 1.0  # 1 / attention's achieved share of the BF16 peak


@dataclass
class Breakdown:
    """A predicted step: the parts (seconds) and their sum."""

    components: dict[str, float]
    terms: Terms

    @property
    def step_s(self) -> float:
        return sum(self.components.values())


def predict(c: StepConfig, hw: Hardware, p: Params) -> Breakdown:
    """The parts of one step; they add up to `Breakdown.step_s`."""
    t = terms(c, hw)
    compute = t.compute * p.slowdown + t.elementwise * p.elementwise_s + t.attention * p.attention_slowdown
    parts = {
        "compute": compute,
        "tp_comm": t.tp_raw * (p.tp_exposed if c.tp_overlap else p.tp_exposed_plain),
        "cp_comm": t.cp_raw * p.cp_exposed,
        # no expert parallelism: the four benchmarks are dense models, with no experts to spread
        # (EP needs a mixture of experts), so there is no expert all-to-all to cost
        "ep_comm": 0.0,
        "pp_bubble": compute * t.bubble_fraction,
        "pp_p2p": t.pp_raw * p.pp_exposed,
        "dp_comm": exposed_dp(t, compute) * p.dp_exposed + t.dp_serial,
        "optimizer": t.opt_bytes / 1e9 * p.opt_s_per_gb,
        "other": p.other_s,
    }
    return Breakdown(components=parts, terms=t)
