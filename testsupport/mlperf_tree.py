"""A synthetic MLPerf submission tree with many systems, for the report's tests and benchmarks.

`write_tree(root)` writes `<root>/<round>/<org>/results/<system>/<benchmark>/result_N.txt` with
`<org>/systems/<system>.json` (and `scaling.json` where a system has a factor), as the MLCommons
trees lay them out, for the MANY systems below: 15 systems, H100 (Azure ND and DGX), H200, GB200,
GB300 and one accelerator no table knows, 8 to 1,024 GPUs (64 and 72 side by side), long system
names, three benchmarks. Each log is short (about 60 MLLOG lines): run_start/stop, the batch
size and sequence length, per-step `tracked_stats` step times (some systems log the step as a
sample count, as NVIDIA's v5.0 NeMo logs do) and eval accuracies with samples_count. Times
derive from a seeded generator, so every call writes the same bytes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any
from pathlib import Path

ROUND = "v5.1"
STEPS = 40
EVAL_EVERY = 10
TARGETS = {"llama2_70b_lora": (0.925, 8192), "llama31_8b": (3.3, 8192),
           "llama31_405b": (5.6, 8192)}  # closed target (a loss: lower is better), sequence
RUNS = {"llama2_70b_lora": 10, "llama31_8b": 10, "llama31_405b": 3}
GBS = {"llama2_70b_lora": 8, "llama31_8b": 32, "llama31_405b": 1152}
# Model FLOPs per token, rounded (6N + 12*L*d*s; LoRA 4N + 12*L*d*s): 70B, 8B, 405B at seq 8192.
FLOPS_PER_TOKEN = {"llama2_70b_lora": 3.4e11, "llama31_8b": 6.1e10, "llama31_405b": 2.6e12}
PEAK_FP8 = {"H100": 1979e12, "H200": 1979e12, "GB200": 5000e12, "GB300": 5000e12}  # dense


@dataclass(frozen=True)
class SynthSystem:
    org: str
    system: str
    accelerator: str
    nodes: int
    per_node: int
    benchmarks: tuple[str, ...]
    mfu: float = 0.45  # the steady step time is set from it (FLOPS_PER_TOKEN, PEAK_FP8)
    samples_as_step: bool = False  # log metadata.step as a sample count (NVIDIA v5.0 NeMo)
    scaling: float | None = None
    system_name: str = ""
    start_day: int = 0  # days after 2025-09-01 of the first run
    gbs: int = 0  # the global batch size; 0: the benchmark's (GBS)

    @property
    def gpus(self) -> int:
        return self.nodes * self.per_node

    def batch(self, bench: str) -> int:
        return self.gbs or GBS[bench]

    def step_s(self, bench: str) -> float:
        peak = next((v for k, v in PEAK_FP8.items() if k in self.accelerator), 2000e12)
        tokens = self.batch(bench) * TARGETS[bench][1]
        return FLOPS_PER_TOKEN[bench] * tokens / (self.gpus * peak * self.mfu)


H100 = "NVIDIA H100-SXM5-80GB"
H200 = "NVIDIA H200-SXM5-141GB"
GB200 = "NVIDIA Blackwell GPU (GB200)"
GB300 = "NVIDIA Blackwell Ultra GPU (GB300)"
LORA, L8B, L405 = "llama2_70b_lora", "llama31_8b", "llama31_405b"

MANY: tuple[SynthSystem, ...] = (
    SynthSystem("Contoso", "ND_H100_v5_n1_nemo", "NVIDIA H100-SXM-80GB", 1, 8, (LORA, L8B),
                mfu=0.52, system_name="ND_H100_v5 x1", start_day=1),
    SynthSystem("Contoso", "ND_H100_v5_n8_nemo", "NVIDIA H100-SXM-80GB", 8, 8, (LORA, L8B),
                mfu=0.46, system_name="ND_H100_v5 x8", start_day=2, scaling=1.02),
    SynthSystem("Contoso", "ND_H100_v5_n64_nemo", "NVIDIA H100-SXM-80GB", 64, 8, (L405,),
                mfu=0.43, system_name="ND_H100_v5 x64", start_day=3, samples_as_step=True),
    SynthSystem("Contoso", "ND_H200_v5_n2_nemo", H200, 2, 8, (LORA, L8B), mfu=0.55,
                system_name="ND_H200_v5 x2", start_day=4),
    SynthSystem("Contoso", "ND_H200_v5_n16_nemo", H200, 16, 8, (LORA,), mfu=0.44,
                system_name="ND_H200_v5 x16", start_day=5),
    SynthSystem("Fabrikam", "dgx-h100_n2_ngc25.09_nemo_tp4pp1cp2_fp8_hybrid", H100, 2, 8,
                (LORA, L8B), mfu=0.5, start_day=6),
    SynthSystem("Fabrikam", "dgx-h100_n9_ngc25.09_nemo_tp4pp1cp2_fp8_hybrid", H100, 9, 8,
                (LORA,), mfu=0.41, start_day=7, scaling=1.011),
    SynthSystem("Fabrikam", "dgx-h100_n128_ngc25.09_nemo", H100, 128, 8, (L405,), mfu=0.41,
                start_day=8, samples_as_step=True),
    SynthSystem("Northwind", "gb200-nvl72_n18_ngc25.09_nemo", GB200, 18, 4, (LORA, L8B),
                mfu=0.4, start_day=9),
    SynthSystem("Northwind", "gb200-nvl72_n4_ngc25.09_nemo", GB200, 4, 4, (LORA,), mfu=0.48,
                start_day=10),
    SynthSystem("Northwind", "gb200-nvl72_n128_ngc25.09_nemo_long_context_variant", GB200, 128, 4,
                (L405,), mfu=0.39, start_day=11),
    SynthSystem("Northwind", "gb200-nvl72_n256_ngc25.09_nemo", GB200, 256, 4, (L405, L8B),
                mfu=0.36, start_day=12),
    SynthSystem("Tailspin", "gb300-nvl72_n18_ngc25.09_nemo", GB300, 18, 4, (LORA, L8B), mfu=0.5,
                start_day=13),
    SynthSystem("Tailspin", "gb300-nvl72_n128_ngc25.09_nemo", GB300, 128, 4, (L405,), mfu=0.45,
                start_day=14),
    SynthSystem("Wingtip", "xpu9-proto_n4", "Wingtip XPU-9 (prototype)", 4, 8, (LORA,),
                start_day=15),
)


def write_tree(root: Path, systems: tuple[SynthSystem, ...] = MANY, seed: int = 31) -> Path:
    """Write the tree under `root` (created); returns `root`."""
    rng = random.Random(seed)
    for s in systems:
        org = root / ROUND / s.org
        (org / "systems").mkdir(parents=True, exist_ok=True)
        (org / "systems" / f"{s.system}.json").write_text(json.dumps({
            "submitter": s.org, "division": "closed", "status": "Available cloud",
            "system_name": s.system_name or s.system, "number_of_nodes": str(s.nodes),
            "accelerators_per_node": str(s.per_node), "accelerator_model_name": s.accelerator,
        }, indent=2), encoding="utf-8")
        for bench in s.benchmarks:
            folder = org / "results" / s.system / bench
            folder.mkdir(parents=True, exist_ok=True)
            if s.scaling:
                (folder / "scaling.json").write_text(json.dumps({"scaling_factor": s.scaling}))
            for k in range(RUNS[bench]):
                (folder / f"result_{k}.txt").write_text(_log(s, bench, k, rng), encoding="utf-8")
    return root


def _log(s: SynthSystem, bench: str, k: int, rng: random.Random) -> str:
    target, seq = TARGETS[bench]
    gbs = s.batch(bench)
    t = 1_756_684_800_000 + (s.start_day * 86_400 + k * 5_400) * 1000  # 2025-09-01 UTC + days
    lines: list[str] = []

    def log(key: str, value: object, **meta: object) -> None:
        lines.append(":::MLLOG " + json.dumps({
            "namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
            "value": value, "metadata": {"file": "synthetic.py", "lineno": 1, **meta}}))

    for key, value in (("submission_benchmark", bench), ("submission_org", s.org),
                       ("submission_platform", s.system), ("submission_division", "closed"),
                       ("global_batch_size", gbs), ("max_sequence_length", seq),
                       ("target_accuracy", target), ("seed", 1000 + k)):
        log(key, value)
    log("init_start", None)
    t += 60_000
    log("init_stop", None)
    log("run_start", None)
    slow = 1.0 + rng.uniform(0.0, 0.08)  # run-to-run spread
    loss = target * 1.4
    for i in range(1, STEPS + 1):
        step_s = s.step_s(bench) * slow * (3.0 if i == 1 else 1.0) * (1 + rng.uniform(-0.02, 0.02))
        t += int(step_s * 1000)
        step = i * gbs if s.samples_as_step else i
        log("tracked_stats", {"train_step_time": step_s}, step=step)
        if i % EVAL_EVERY == 0:
            loss -= (loss - target * 0.98) * 0.45
            log("eval_accuracy", round(loss, 4), samples_count=i * gbs)
            log("eval_stop", None, samples_count=i * gbs)
    t += 1000
    log("run_stop", None, status="success")
    return "\n".join(lines) + "\n"


def record_compliance_passed(store: Any) -> int:
    """Record every stored result that has a round as passing mlperf_logging's checker for that
    round (what `results import` records for a compliant tree). The synthetic logs are never put
    through the checker: the tests that read them test figures and views, and a score is official
    only with a passed verdict (results.definitions.verdict). Returns how many were marked."""
    rows = [r.model_copy(update={
        "compliance_ok": True, "ruleset": r.ruleset or f"{r.round.lstrip('v')}.0",
        "compliance_json": json.dumps({"ok": True, "ruleset": f"{r.round.lstrip('v')}.0",
                                       "messages": [], "checked": True})})
        for r in store.list_results() if r.round]
    return int(store.refile_results(rows))
