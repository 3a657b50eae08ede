"""What MFU needs to know of a benchmark's model, each fact with its source."""

from __future__ import annotations

from pydantic import Field

from orchestrator.models.base import Frozen


class ModelFacts(Frozen):
    """What MFU needs to know of a benchmark's model, each fact with its source.

    FLOPs per token F = 6*params + 12*layers*d_model*seq (mlperf-notes 10.3: 6N for forward and
    backward, Kaplan et al. 2020; 12*L*d*s for attention scores, PaLM appendix B, Chowdhery et
    al. 2022). `precision` is the GEMM precision the benchmark's reference submissions train in,
    so MFU is given against that peak as well as against dense BF16. A recipe carries them
    (its `model:` block); the report receives them from its caller, keyed by benchmark.
    """

    params: float = Field(gt=0, description="parameter count as published")
    layers: int = Field(ge=1)
    d_model: int = Field(ge=1)
    seq_len: int = Field(ge=1, description="used when the log has no max_sequence_length")
    precision: str = Field(pattern="^(bf16|fp8|fp4)$")
    # Parameters that get weight gradients; None = all (pre-training). A frozen base (LoRA) still
    # runs forward (2N) and the activation-gradient backward (2N), but no weight gradients.
    trainable_params: float | None = Field(None, gt=0)
    # Parameters every token passes through, where that is not all of them (FLUX.1: its blocks'
    # timestep modulation and the embedders run once per sample); None = params.
    token_params: float | None = Field(None, gt=0)
    # Training FLOPs per sample counted from the layer dimensions, for a model with no token
    # sequence (DLRM-DCNv2, RetinaNet, R-GAT: `seq_len` 1, a "token" is a sample); it replaces
    # the transformer formula, and `sample_flops_method` says how it was counted.
    sample_flops: float | None = Field(None, gt=0)
    sample_flops_method: str = ""
    source: str
    # The GEMM precision of the config each published system ran (the one its README names:
    # recipes/configs/*/*/SUBMISSIONS.txt), by the system's label (e.g.
    # "v5.1/NVIDIA/hsg_ngpu5120_ngc25.09_nemo") -> "fp4: FP4=True (file:line); config X, named by
    # README:LINE", filled by recipes.catalog.model_facts for every vendored config: an imported
    # log that does not say its precision is measured against the one its system's config set.
    config_precisions: dict[str, str] = Field(default_factory=dict)
    # NVIDIA's own count, MODEL_TFLOP_PER_SAMPLE in the submissions' config_common*.sh (read from
    # the vendored file by model_facts), and why azbench's F differs where it does (the recipe's).
    reference_tflop_per_sample: float | None = None
    reference_source: str = ""
    reference_note: str = ""

    def flops_per_token(self, seq_len: int | None = None) -> float:
        seq = seq_len or self.seq_len
        if self.sample_flops is not None:  # F x GBS x seq (definitions.mfu) is then F x GBS
            return self.sample_flops / seq
        per_token = self.params if self.token_params is None else self.token_params
        trained = per_token if self.trainable_params is None else self.trainable_params
        return 4.0 * per_token + 2.0 * trained + 12.0 * self.layers * self.d_model * seq

    @property
    def formula(self) -> str:
        if self.sample_flops is not None:
            return (f"{self.sample_flops:,.4g} FLOP per sample, counted from the layer dimensions: "
                    f"{self.sample_flops_method}")
        if self.trainable_params is not None:
            return (f"4N + 2N_trainable + 12*L*d*s per token (frozen base: forward 2N and "
                    f"activation gradients 2N, weight gradients only for {self.trainable_params:,.0f}"
                    f" trainable parameters; attention: PaLM app. B)")
        if self.token_params is not None:
            return (f"6N_token + 12*L*d*s per token (N_token: the {self.token_params:,.0f} parameters "
                    f"every token passes through, of {self.params:,.0f}; the rest run once per "
                    "sample; 6N: Kaplan et al. 2020; attention: PaLM app. B)")
        return "6N + 12*L*d*s per token (6N: Kaplan et al. 2020; attention: PaLM app. B)"
