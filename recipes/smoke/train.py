"""azbench smoke benchmark: train a tiny transformer LM on a synthetic language to a target accuracy.

A standalone, MLPerf-style training run that needs only torch and mlperf-logging, so it runs on bare
cluster nodes. Data parallel over every process (gloo on CPU, nccl on CUDA), weak scaling (a fixed
micro batch per rank), MLLOG on rank 0's stdout, atomic checkpoints with --resume, and fault-injection
switches for azbench's own tests. Exit codes: 0 target reached; 1 crash or injected failure;
2 application error (bad configuration, non-finite loss); 3 aborted (target not reached by
--max-steps/--max-seconds); 75 preempted (SIGUSR1, a spot eviction notice: checkpointed, resume
me); 124 watchdog (no finish by --max-seconds + --watchdog-grace, e.g. a hang).
See README.md beside this file.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import random
import re
import signal
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NoReturn

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from mlperf_logging import mllog
from mlperf_logging.mllog import constants as C

EXIT_OK, EXIT_CRASH, EXIT_APP, EXIT_ABORTED, EXIT_WATCHDOG = 0, 1, 2, 3, 124
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: checkpointed on SIGUSR1 (eviction notice); retry and resume
LANGUAGE_SEED = 20240917  # fixes the synthetic language itself; --seed only varies init and sampling
CKPT_RE = re.compile(r"^ckpt_step(\d{8})\.pt$")
KEEP_CKPTS = 2


class AppError(Exception):
    """A configuration or numerical problem the user must fix; never worth a retry."""


# -- preemption notice (SIGUSR1 from azbench's spot agent via scancel --signal) ------------------
NOTICE = threading.Event()


class Preempted(Exception):
    """Every rank stops after the step in which any rank got SIGUSR1; rank 0 has checkpointed."""


def install_notice_handler() -> None:
    """SIGUSR1 only sets a flag: the training loop checkpoints at the next step boundary."""
    signal.signal(signal.SIGUSR1, lambda signum, frame: NOTICE.set())


def notice_agreed(d: Dist) -> bool:
    """True on every rank once any rank got the notice; one tiny all-reduce per step, outside
    the timed step, so ranks signalled a step apart still stop at the same step."""
    return all_sum([1.0 if NOTICE.is_set() else 0.0], d)[0] > 0


def stop_for_notice(t: Trainer, saved: bool) -> None:
    """Checkpoint this step (rank 0) unless just saved, wait for it on every rank, then stop."""
    if t.d.rank == 0 and not saved:
        checkpoint(t)
    all_sum([0.0], t.d)  # a barrier: no rank exits (srun --kill-on-bad-exit) before the save
    if t.d.rank == 0:
        print(f"azbench-smoke: preemption notice (SIGUSR1): checkpointed step {t.step}; "
              f"exiting {EXIT_PREEMPTED} to resume elsewhere", file=sys.stderr, flush=True)
    raise Preempted()


# Flags whose default an environment variable may set (the sbatch script and azbench's tests use these).
ENV_DEFAULTS = {
    "max_seconds": "AZBENCH_SMOKE_MAX_SECONDS", "ckpt_dir": "AZBENCH_SMOKE_CKPT_DIR",
    "platform": "AZBENCH_PLATFORM", "hang_at_step": "AZBENCH_SMOKE_HANG_AT_STEP",
    "fail_at_step": "AZBENCH_SMOKE_FAIL_AT_STEP", "fault_rank": "AZBENCH_SMOKE_FAULT_RANK",
    "step_sleep": "AZBENCH_SMOKE_STEP_SLEEP",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="azbench smoke benchmark (MLPerf-style, synthetic data)",
                                epilog="Env defaults: " + ", ".join(f"{v} (--{k.replace('_', '-')})"
                                                                    for k, v in ENV_DEFAULTS.items()))
    a = p.add_argument
    a("--batch-size", type=int, default=32, help="micro batch per rank (global = this x world size)")
    a("--seq-len", type=int, default=64, help="tokens per sequence")
    a("--vocab", type=int, default=48, help="vocabulary size of the synthetic language")
    a("--noise", type=float, default=0.1, help="chance a token is uniform noise instead of the rule")
    a("--d-model", type=int, default=128)
    a("--layers", type=int, default=2)
    a("--heads", type=int, default=4)
    a("--lr", type=float, default=1e-2, help="AdamW base learning rate")
    a("--warmup-steps", type=int, default=10)
    a("--weight-decay", type=float, default=0.0)
    a("--seed", type=int, default=1)
    a("--target", type=float, default=0.87, help="target eval token accuracy")
    a("--eval-every", type=int, default=25, help="evaluate every K steps")
    a("--eval-samples", type=int, default=256, help="held-out sequences")
    a("--max-steps", type=int, default=2000, help="stop with status aborted after this many steps")
    a("--max-seconds", type=float, default=600.0, help="stop (aborted) at the first eval after this")
    a("--watchdog-grace", type=float, default=60.0,
      help="exit 124 if not finished --max-seconds + this after start (catches hangs)")
    a("--ckpt-dir", default="checkpoints", help="checkpoint directory; put it on the shared run dir")
    a("--ckpt-every", type=int, default=20, help="checkpoint every K steps; 0 disables")
    a("--resume", action="store_true", default=os.environ.get("AZBENCH_SMOKE_RESUME") == "1",
      help="continue from the newest complete checkpoint if any (env AZBENCH_SMOKE_RESUME=1)")
    a("--platform", default=None, help="submission_platform (default <world>xLocal_CPU or <world>x<GPU>)")
    a("--device", choices=["auto", "cpu", "cuda"], default="auto")
    a("--threads", type=int, default=1, help="torch intra-op threads per process")
    a("--dist-timeout", type=float, default=300.0, help="seconds a collective may wait for peers")
    a("--hang-at-step", type=int, default=0, help="test switch: sleep forever at this step")
    a("--fail-at-step", type=int, default=0, help="test switch: exit 1 at this step")
    a("--fault-rank", type=int, default=-1, help="rank the hang/fail switches hit; -1 = every rank")
    a("--step-sleep", type=float, default=0.0, help="test switch: extra seconds inside each timed step")
    # argparse converts string defaults with the flag's type, so a bad env value is a usage error.
    p.set_defaults(**{k: os.environ[v] for k, v in ENV_DEFAULTS.items() if os.environ.get(v)})
    return p.parse_args(argv)


def validate(args: argparse.Namespace) -> None:
    """Reject bad hyperparameters before any process group exists, so every rank fails fast."""
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise AppError(f"--lr must be a finite number > 0, got {args.lr}")
    if not (0.0 < args.target <= 1.0):
        raise AppError(f"--target must be in (0, 1], got {args.target}")
    if not (0.0 <= args.noise < 1.0):
        raise AppError(f"--noise must be in [0, 1), got {args.noise}")
    positive = ("batch_size", "seq_len", "d_model", "layers", "heads", "eval_every",
                "eval_samples", "max_steps", "threads", "max_seconds")
    for name in positive:
        if not getattr(args, name) > 0:
            raise AppError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if args.vocab < 2 or args.seq_len < 3 or args.d_model % args.heads:
        raise AppError("need --vocab >= 2, --seq-len >= 3 and --d-model divisible by --heads")
    if min(args.warmup_steps, args.ckpt_every, args.step_sleep, args.weight_decay) < 0:
        raise AppError("--warmup-steps, --ckpt-every, --step-sleep, --weight-decay must be >= 0")


@dataclass(frozen=True)
class Dist:
    rank: int
    world: int
    local_rank: int
    device: torch.device


def dist_env() -> tuple[int, int, int]:
    """(rank, world, local_rank): srun's SLURM_* first, torch's RANK/WORLD_SIZE next, else 1 process."""
    e = os.environ
    # torchrun inside an allocation also sees SLURM_PROCID (one per node); its own vars win then.
    if "SLURM_PROCID" in e and "SLURM_NTASKS" in e and "TORCHELASTIC_RUN_ID" not in e:
        return int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"]), int(e.get("SLURM_LOCALID", "0"))
    if "RANK" in e and "WORLD_SIZE" in e:
        return int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", "0"))
    return 0, 1, 0


def init_dist(args: argparse.Namespace) -> Dist:
    rank, world, local = dist_env()
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", local % max(torch.cuda.device_count(), 1)) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port:
            raise AppError(f"world size {world} needs MASTER_ADDR and MASTER_PORT in the environment")
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://{addr}:{port}",
                                rank=rank, world_size=world,
                                timeout=timedelta(seconds=args.dist_timeout))
    return Dist(rank, world, local, device)


def all_sum(values: list[float], d: Dist) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=d.device)
    if d.world > 1:
        dist.all_reduce(t)
    return t.tolist()


class Language:
    """A fixed second-order Markov language: token t = rule[t-2, t-1], or uniform noise."""

    def __init__(self, vocab: int, noise: float) -> None:
        g = torch.Generator().manual_seed(LANGUAGE_SEED)
        self.rule = torch.randint(0, vocab, (vocab, vocab), generator=g)
        self.vocab, self.noise = vocab, noise

    def sample(self, n: int, length: int, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        seq = torch.randint(0, self.vocab, (n, length), generator=g)
        noisy = torch.rand(n, length, generator=g) < self.noise
        for t in range(2, length):
            ruled = self.rule[seq[:, t - 2], seq[:, t - 1]]
            seq[:, t] = torch.where(noisy[:, t], seq[:, t], ruled)
        return seq


class TinyLM(nn.Module):
    def __init__(self, vocab: int, seq_len: int, d_model: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(1)
        h = self.tok(x) + self.pos(torch.arange(n, device=x.device))
        # Built per call rather than kept as a buffer, which DDP would re-broadcast every step.
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=x.device)
        h = self.blocks(h, mask=mask, is_causal=True)
        return self.head(self.norm(h))


class MLLog:
    """mllog on rank 0 only; stack_offset 2 so file/lineno name our caller, not this wrapper."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self._l = enabled, mllog.get_mllogger()
        if enabled:
            mllog.config(default_stack_offset=2, root_dir=os.path.dirname(os.path.abspath(__file__)))

    def event(self, key: str, value: object = None, **md: object) -> None:
        self.enabled and self._l.event(key=key, value=value, metadata=md or None)

    def start(self, key: str, value: object = None, **md: object) -> None:
        self.enabled and self._l.start(key=key, value=value, metadata=md or None)

    def end(self, key: str, value: object = None, **md: object) -> None:
        self.enabled and self._l.end(key=key, value=value, metadata=md or None)


def list_ckpts(ckpt_dir: str) -> list[tuple[int, str]]:
    """(step, path) of complete checkpoints, newest first; temp files never match the pattern."""
    if not os.path.isdir(ckpt_dir):
        return []
    found = [(int(m.group(1)), os.path.join(ckpt_dir, n))
             for n in os.listdir(ckpt_dir) if (m := CKPT_RE.match(n))]
    return sorted(found, reverse=True)


def save_ckpt(ckpt_dir: str, state: dict) -> str:
    """Write, fsync, rename into place, fsync the dir, then keep only the newest KEEP_CKPTS."""
    os.makedirs(ckpt_dir, exist_ok=True)
    final = os.path.join(ckpt_dir, f"ckpt_step{state['step']:08d}.pt")
    tmp = os.path.join(ckpt_dir, f".{os.path.basename(final)}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    dfd = os.open(ckpt_dir, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    for _, old in list_ckpts(ckpt_dir)[KEEP_CKPTS:]:
        os.remove(old)
    return final


def load_newest(ckpt_dir: str) -> dict | None:
    """The newest checkpoint that loads; an unreadable one is skipped for the next older one."""
    for step, path in list_ckpts(ckpt_dir):
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a torn or foreign file: fall back rather than die
            print(f"azbench-smoke: skipping unreadable checkpoint {path}: {exc}", file=sys.stderr)
    return None


def share_ckpt(args: argparse.Namespace, d: Dist) -> dict | None:
    """Rank 0 reads the checkpoint and sends it to every rank, so they all resume from one step."""
    state = load_newest(args.ckpt_dir) if (args.resume and d.rank == 0) else None
    if d.world > 1 and args.resume:
        box = [state]
        dist.broadcast_object_list(box, src=0)
        state = box[0]
    return state


def log_config(log: MLLog, args: argparse.Namespace, d: Dist, platform: str) -> None:
    gbs = args.batch_size * d.world
    for key, value in [
        (C.SUBMISSION_BENCHMARK, "smoke"), (C.SUBMISSION_ORG, "azbench"), (C.SUBMISSION_DIVISION, "open"),
        (C.SUBMISSION_PLATFORM, platform), (C.SUBMISSION_STATUS, "research"),
        (C.GLOBAL_BATCH_SIZE, gbs), (C.GRADIENT_ACCUMULATION_STEPS, 1), (C.OPT_NAME, C.ADAMW),
        (C.OPT_BASE_LR, args.lr), (C.OPT_LR_WARMUP_STEPS, args.warmup_steps),
        (C.OPT_ADAMW_WEIGHT_DECAY, args.weight_decay), (C.SEED, args.seed),
        (C.TRAIN_SAMPLES, args.max_steps * gbs), (C.EVAL_SAMPLES, args.eval_samples),
        (C.MAX_SEQUENCE_LENGTH, args.seq_len), (C.MAX_STEPS, args.max_steps),
        ("micro_batch_size", args.batch_size), ("target_accuracy", args.target),
    ]:
        log.event(key, value)


def evaluate(model: nn.Module, eval_set: torch.Tensor, d: Dist, stop_flag: float) -> tuple[float, float, bool]:
    """(token accuracy, mean loss, stop) over the held-out set, sharded across ranks.

    Position 0's target is a free random token (no rule applies), so it is left out. The stop
    flag rides on the same all-reduce so every rank makes the same stop decision.
    """
    model.eval()
    shard = eval_set[d.rank::d.world].to(d.device)
    with torch.no_grad():
        logits = model(shard[:, :-1])[:, 1:]
        target = shard[:, 2:]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), reduction="sum")
        correct = (logits.argmax(-1) == target).sum()
    model.train()
    c, n, loss_sum, stop = all_sum([float(correct), float(target.numel()), float(loss), stop_flag], d)
    return c / n, loss_sum / n, stop > 0


def inject_faults(args: argparse.Namespace, d: Dist, step: int) -> None:
    if args.fault_rank not in (-1, d.rank):
        return
    if step == args.fail_at_step:
        print(f"azbench-smoke: injected failure at step {step} (rank {d.rank})", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_CRASH)
    if step == args.hang_at_step:
        print(f"azbench-smoke: injected hang at step {step} (rank {d.rank})", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)


@dataclass
class Trainer:
    args: argparse.Namespace
    d: Dist
    log: MLLog
    lang: Language
    raw: TinyLM
    model: nn.Module
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    step: int = 0
    samples: int = 0
    compute_s: list[float] = field(default_factory=list)  # this rank's compute time per step


def build(args: argparse.Namespace, d: Dist, log: MLLog) -> Trainer:
    """Model, optimizer and schedule, restored from the newest checkpoint under --resume."""
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    raw = TinyLM(args.vocab, args.seq_len, args.d_model, args.layers, args.heads).to(d.device)
    opt = torch.optim.AdamW(raw.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (args.warmup_steps + 1)))
    state = share_ckpt(args, d)
    if state is not None:
        try:
            raw.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise AppError(f"checkpoint step {state.get('step')} does not fit this model config: {exc}")
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        log.event("resumed_from_checkpoint", int(state["step"]), samples_count=int(state["samples"]))
    model = nn.parallel.DistributedDataParallel(raw) if d.world > 1 else raw
    t = Trainer(args, d, log, Language(args.vocab, args.noise), raw, model, opt, sched)
    if state is not None:
        t.step, t.samples = int(state["step"]), int(state["samples"])
    log.event(C.INIT_CHECKPOINT_STEP, t.step)
    return t


def train_step(t: Trainer) -> None:
    """One optimizer step on this rank's deterministic batch for (seed, rank, step), timed."""
    a = t.args
    inject_faults(a, t.d, t.step + 1)
    t0, c0 = time.perf_counter(), compute_clock(t.d.device)
    batch = t.lang.sample(a.batch_size, a.seq_len + 1,
                          seed=(a.seed * 1_000_003 + t.d.rank) * 1_000_003 + t.step).to(t.d.device)
    logits = t.model(batch[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, a.vocab), batch[:, 1:].reshape(-1))
    slow_node_work()
    t.compute_s.append(compute_clock(t.d.device) - c0)  # before backward: no collective in this time
    t.opt.zero_grad(set_to_none=True)
    loss.backward()
    t.opt.step()
    t.sched.step()
    if a.step_sleep:
        time.sleep(a.step_sleep)
    if t.d.device.type == "cuda":
        torch.cuda.synchronize()
    t.step, t.samples = t.step + 1, t.samples + a.batch_size * t.d.world
    t.log.event("tracked_stats", {"train_step_time": time.perf_counter() - t0},
                step=t.step, samples_count=t.samples)


def compute_clock(device: torch.device) -> float:
    """The clock a rank's compute time is read from. On a GPU, wall time once the device has
    finished what was queued (kernels run asynchronously: without the synchronize, the forward
    pass would time only its launches). On the CPU, this process's CPU time: emulated nodes share
    the machine's cores, and there wall time measures the wait for a core (a busy machine made a
    healthy node look 25 % slow beside the others), not the node's own speed."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return time.perf_counter()
    return time.process_time()


def slow_node_work() -> None:
    """Test switch: AZBENCH_SMOKE_SLOW_NODES=node2 gives that node AZBENCH_SMOKE_SLOW_SLEEP
    seconds (default 0.05) of extra CPU work per step: a straggler, slow by CPU time and so by
    wall time too (a sleep would not show in the CPU clock the CPU build reads)."""
    slow = os.environ.get("AZBENCH_SMOKE_SLOW_NODES", "")
    if slow and os.environ.get("SLURMD_NODENAME", socket.gethostname()) in slow.split(","):
        end = time.process_time() + float(os.environ.get("AZBENCH_SMOKE_SLOW_SLEEP", "0.05"))
        while time.process_time() < end:
            pass


def log_node_step_times(t: Trainer) -> None:
    """Each node's median compute time per step over the block, gathered to rank 0 and logged
    as one MLLOG event {node: seconds} (a slow node hides in every rank's wall step time, since
    the gradient all-reduce waits for it; its compute time shows it)."""
    mine = (os.environ.get("SLURMD_NODENAME", socket.gethostname()),
            statistics.median(t.compute_s) if t.compute_s else float("nan"))
    t.compute_s.clear()
    every = [mine]
    if t.d.world > 1:
        every = [None] * t.d.world
        dist.all_gather_object(every, mine)
    per_node: dict[str, float] = {}
    for node, seconds in every:
        per_node[node] = max(per_node.get(node, 0.0), round(seconds, 6))
    t.log.event("azbench_node_step_time", per_node, step=t.step)


def checkpoint(t: Trainer) -> None:
    """Save (rank 0), then log azbench_checkpoint: the step it holds and the seconds writing it
    took, logged once it is complete (azbench's goodput counts that time as checkpointing)."""
    t0 = time.perf_counter()
    save_ckpt(t.args.ckpt_dir, {
        "step": t.step, "samples": t.samples, "world_size": t.d.world, "model": t.raw.state_dict(),
        "optimizer": t.opt.state_dict(), "scheduler": t.sched.state_dict(),
        "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()})
    t.log.event("azbench_checkpoint", t.step, seconds=round(time.perf_counter() - t0, 6))


def train(t: Trainer, eval_set: torch.Tensor, t0: float) -> tuple[str, float]:
    """The timed region, run_start to run_stop: returns (status, last eval accuracy)."""
    a, log = t.args, t.log
    log.start(C.RUN_START)
    status, acc, block = C.ABORTED, 0.0, t.step // a.eval_every
    log.start(C.BLOCK_START, samples_count=t.samples, epoch_num=block)
    while t.step < a.max_steps:
        train_step(t)
        saved = bool(a.ckpt_every and t.step % a.ckpt_every == 0)
        if saved and t.d.rank == 0:
            checkpoint(t)
        if notice_agreed(t.d):
            stop_for_notice(t, saved)
        if t.step % a.eval_every and t.step != a.max_steps:
            continue
        md = {"samples_count": t.samples, "epoch_num": block}
        log_node_step_times(t)
        log.end(C.BLOCK_STOP, **md)
        log.start(C.EVAL_START, **md)
        over_time = t.d.rank == 0 and time.monotonic() - t0 > a.max_seconds
        acc, eval_loss, stop = evaluate(t.model, eval_set, t.d, float(over_time))
        log.end(C.EVAL_STOP, **md)
        log.event(C.EVAL_ACCURACY, acc, step=t.step, **md)
        if not math.isfinite(eval_loss):
            log.end(C.RUN_STOP, status=C.ABORTED, samples_count=t.samples)
            raise AppError(f"eval loss is not finite at step {t.step}: is the learning rate too high?")
        if acc >= a.target:
            status = C.SUCCESS
            break
        if stop:
            print(f"azbench-smoke: --max-seconds {a.max_seconds} reached", file=sys.stderr)
            break
        block += 1
        if t.step < a.max_steps:
            log.start(C.BLOCK_START, samples_count=t.samples, epoch_num=block)
    log.end(C.RUN_STOP, status=status, samples_count=t.samples)
    log.event(C.TRAINED_SAMPLES, t.samples)
    return status, acc


def start_watchdog(args: argparse.Namespace) -> threading.Timer:
    def fire() -> None:
        print(f"azbench-smoke: watchdog: not finished after {args.max_seconds + args.watchdog_grace:.0f} s "
              "(--max-seconds + --watchdog-grace); exiting 124", file=sys.stderr, flush=True)
        os._exit(EXIT_WATCHDOG)
    timer = threading.Timer(args.max_seconds + args.watchdog_grace, fire)
    timer.daemon = True
    timer.start()
    return timer


def close_dist(t: Trainer) -> None:
    """Wait for every rank, then destroy the process group; a no-op for one process. The wait keeps
    rank 0, which serves the rendezvous store, from leaving while the others still use it."""
    if t.d.world == 1:
        return
    all_sum([0.0], t.d)
    dist.destroy_process_group()


def exit_now(code: int) -> NoReturn:
    """Flush and exit without interpreter finalization. gloo's worker threads outlive
    destroy_process_group and free the last collective's tensors, which takes the GIL; if that
    happens during finalization the process aborts ("terminate called without an active
    exception", exit 134; pytorch/pytorch#179291): about 1 in 8 two-rank runs that had reached
    their target failed that way."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(args: argparse.Namespace, t0: float) -> int:
    validate(args)
    torch.set_num_threads(args.threads)
    watchdog = start_watchdog(args)
    rank0 = dist_env()[0] == 0
    log = MLLog(rank0)
    log.event(C.CACHE_CLEAR, True)
    log.start(C.INIT_START)
    d = init_dist(args)
    platform = args.platform or (f"{d.world}x{torch.cuda.get_device_name(d.device).replace(' ', '_')}"
                                 if d.device.type == "cuda" else f"{d.world}xLocal_CPU")
    log_config(log, args, d, platform)
    eval_set = Language(args.vocab, args.noise).sample(args.eval_samples, args.seq_len + 1, LANGUAGE_SEED + 1)
    t = build(args, d, log)
    log.end(C.INIT_STOP)
    t_run = time.monotonic()
    try:
        status, acc = train(t, eval_set, t0)
    except Preempted:
        close_dist(t)  # every rank agreed to stop at this step, so every rank gets here
        raise
    watchdog.cancel()
    if d.rank == 0:
        print(f"azbench-smoke: status={status} steps={t.step} samples={t.samples} eval_accuracy={acc:.4f} "
              f"target={args.target} world={d.world} run_s={time.monotonic() - t_run:.1f} "
              f"wall_s={time.monotonic() - t0:.1f} platform={platform}", flush=True)
    close_dist(t)
    return EXIT_OK if status == C.SUCCESS else EXIT_ABORTED


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    args = parse_args(argv)
    install_notice_handler()
    try:
        return run(args, t0)
    except Preempted:
        return EXIT_PREEMPTED
    except AppError as exc:
        print(f"azbench-smoke: application error: {exc}", file=sys.stderr, flush=True)
        return EXIT_APP


if __name__ == "__main__":
    exit_now(main())
