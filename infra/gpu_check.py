"""The Python half of infra/gpu-check.sh: GPU facts, the GEMM probe, the smoke run's MFU, and the
JSON lines the check writes. Needs torch; the MFU needs azbench's own code (pydantic), which the
shell half puts on PYTHONPATH (the repo, and a wheel folder when the machine lacks packages).

    python3 infra/gpu_check.py env
    python3 infra/gpu_check.py health ARGS...   (templates/health_check.py's own arguments)
    python3 infra/gpu_check.py gemm [--seconds S]
    python3 infra/gpu_check.py mfu LOG --d-model D --layers L --heads H --seq-len S --vocab V
    python3 infra/gpu_check.py record FILE STEP STATUS SECONDS DETAIL [JSON]

Each command prints one JSON object on its last line (record appends one to FILE).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


def _gpu_row() -> object | None:
    """The azbench catalog row of this machine's GPU (its dense peaks), or None."""
    import torch
    from orchestrator.hardware.catalog import gpu_row
    if not torch.cuda.is_available():
        return None
    return gpu_row(torch.cuda.get_device_name(0))


def env() -> dict[str, object]:
    import torch
    out: dict[str, object] = {"python": platform.python_version(), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "gpus": torch.cuda.device_count()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=p.name, memory_gib=round(p.total_memory / 2**30, 1), sm=f"{p.major}.{p.minor}",
                   nccl=".".join(map(str, torch.cuda.nccl.version())))
        try:
            row = _gpu_row()
            out["catalog"] = getattr(row, "name", None)
        except ImportError as exc:
            out["catalog"] = f"azbench not importable: {exc}"
    return out


def gemm(seconds: float) -> dict[str, object]:
    """Dense GEMM TFLOP/s (8192^3, the best of timed batches) in BF16, and in FP8 through
    torch._scaled_mm where the GPU has it, against the catalog's dense peaks for this GPU."""
    import torch
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    n = 8192
    dev = torch.device("cuda", 0)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    out: dict[str, object] = {"n": n, "gpu": torch.cuda.get_device_name(0)}

    def timed(fn: object, label: str) -> float:
        best = 0.0
        deadline = time.perf_counter() + seconds
        fn()  # type: ignore[operator]  # warm-up
        torch.cuda.synchronize()
        while time.perf_counter() < deadline:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                fn()  # type: ignore[operator]
            stop.record()
            stop.synchronize()
            best = max(best, 20 * 2 * n ** 3 / (start.elapsed_time(stop) / 1e3) / 1e12)
        out[f"{label}_tflops"] = round(best, 1)
        return best

    timed(lambda: a @ b, "bf16")
    try:
        fp8 = torch.float8_e4m3fn
        a8 = a.to(fp8)
        b8 = b.to(fp8).t().contiguous().t()  # column-major second operand, as _scaled_mm wants
        one = torch.tensor(1.0, device=dev)
        timed(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), "fp8")
    except (AttributeError, RuntimeError, TypeError) as exc:
        out["fp8"] = f"not measured: {type(exc).__name__}: {str(exc)[:160]}"
    try:
        row = _gpu_row()
    except ImportError as exc:
        row, out["peaks"] = None, f"azbench not importable: {exc}"
    if row is not None:
        for precision in ("bf16", "fp8"):
            peak = row.peak_tflops(precision)  # type: ignore[attr-defined]
            got = out.get(f"{precision}_tflops")
            if peak and isinstance(got, float):
                out[f"{precision}_of_peak"] = round(got / peak, 4)
                out[f"{precision}_peak_tflops"] = peak
        out["peak_source"] = getattr(row, "peak_source", "")
    return out


def mfu(log: Path, d_model: int, layers: int, heads: int, seq_len: int, vocab: int,
        world: int) -> dict[str, object]:
    """The smoke run's MFU by the report's own code (results.definitions.mfu when
    its imports are here, else the same results.metrics functions it calls), for the smoke
    model: F = 6N + 12*L*d*s with N the non-embedding parameters of recipes/smoke/train.py's
    TinyLM at these sizes."""
    import torch
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "smoke"))
    from train import TinyLM  # noqa: E402 - the smoke recipe's own model
    from orchestrator.models import ModelFacts
    from orchestrator.results import metrics
    from orchestrator.results.mllog import parse_file
    model = TinyLM(vocab, seq_len, d_model, layers, heads)
    total = sum(p.numel() for p in model.parameters())
    embeddings = model.tok.weight.numel() + model.pos.weight.numel()
    # The smoke model trains in FP32 (no autocast): its MFU is against the dense BF16 peak, the
    # catalog having no FP32 one, and says so (out["precision_note"]).
    facts = ModelFacts(params=total - embeddings, layers=layers, d_model=d_model, seq_len=seq_len,
                       precision="bf16", source="recipes/smoke/train.py TinyLM, counted by infra/gpu_check.py")
    summary = parse_file(log)
    stats = metrics.step_time_stats(summary.step_times)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    out: dict[str, object] = {"non_embedding_params": total - embeddings, "steps": len(summary.step_times),
                              "status": summary.status, "gbs": summary.global_batch_size,
                              "precision_note": "the smoke model trains in FP32; MFU is against dense BF16"}
    try:
        from orchestrator.results.definitions import mfu as mfu_of
        got = mfu_of(facts, "smoke", gpu, world, summary.global_batch_size,
                     summary.max_sequence_length, stats, source="per-step tracked_stats")
        out.update(code="results.definitions.mfu", mfu=got.value, mfu_precision=got.precision,
                   mfu_bf16=got.bf16, mfu_peak_tflops=got.peak_tflops,
                   model_tflops_per_gpu=got.model_tflops_per_gpu, mfu_note=got.note)
    except ImportError as exc:  # the report's store needs sqlalchemy: same formula, its parts
        row = _gpu_row()
        if stats is None or row is None or not summary.global_batch_size:
            out.update(code="results.metrics", mfu=None, mfu_note=f"MFU blank: {exc}")
            return out
        tokens = summary.global_batch_size * (summary.max_sequence_length or seq_len)
        flops = facts.flops_per_token(summary.max_sequence_length or seq_len)
        out.update(code="results.metrics.mfu (results.definitions not importable: " + str(exc)[:80] + ")",
                   model_tflops_per_gpu=flops * tokens / stats.median / world / 1e12,
                   mfu=metrics.mfu(flops, tokens, stats.median, world, row.peak_tflops_bf16 or 1.0),  # type: ignore[attr-defined]
                   mfu_precision="bf16")
    if stats is not None:
        out["median_step_s"] = round(stats.median, 6)
        out["mean_step_s"] = round(statistics.fmean([s.seconds for s in summary.step_times]), 6)
    return out


def health(args: list[str]) -> tuple[dict[str, object], int]:
    """templates/health_check.py run as one process: {check: [status, value]} of its
    AZBENCH_HEALTH lines, and 1 when one failed."""
    import subprocess
    script = Path(__file__).resolve().parents[1] / "templates" / "health_check.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
    checks: dict[str, object] = {}
    failed = done.returncode != 0
    for line in done.stdout.splitlines():
        if line.startswith("AZBENCH_HEALTH "):
            row = json.loads(line.split(" ", 1)[1])
            checks[row["check"]] = [row["status"], row["value"], row["detail"][:80]]
            failed |= row["status"] == "fail"
    if not checks:
        checks["error"] = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return checks, int(failed)


def record(path: Path, step: str, status: str, seconds: float, detail: str, data: str) -> dict[str, object]:
    line: dict[str, object] = {"check": "gpu-check", "step": step, "status": status,
                               "seconds": round(seconds, 1), "detail": detail[:500],
                               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        parsed = json.loads(data) if data else {}
        line["data"] = parsed
    except ValueError:
        line["data"] = {"raw": data[-500:]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    return line


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env")
    sub.add_parser("health")  # its arguments go to templates/health_check.py as they are
    g = sub.add_parser("gemm")
    g.add_argument("--seconds", type=float, default=5.0)
    m = sub.add_parser("mfu")
    m.add_argument("log", type=Path)
    for name, default in (("--d-model", 128), ("--layers", 2), ("--heads", 4), ("--seq-len", 64),
                          ("--vocab", 48), ("--world", 1)):
        m.add_argument(name, type=int, default=default)
    r = sub.add_parser("record")
    r.add_argument("file", type=Path)
    r.add_argument("step")
    r.add_argument("status")
    r.add_argument("seconds", type=float)
    r.add_argument("detail")
    r.add_argument("data", nargs="?", default="")
    a, rest = p.parse_known_args(argv)
    if rest and a.cmd != "health":
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    code = 0
    if a.cmd == "env":
        result: dict[str, object] = env()
    elif a.cmd == "health":
        result, code = health(rest)
    elif a.cmd == "gemm":
        result = gemm(a.seconds)
    elif a.cmd == "mfu":
        result = mfu(a.log, a.d_model, a.layers, a.heads, a.seq_len, a.vocab, a.world)
    else:
        result = record(a.file, a.step, a.status, a.seconds, a.detail, a.data)
    print(json.dumps(result, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
