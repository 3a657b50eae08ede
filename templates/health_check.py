"""azbench health check, run by templates/health_check.sbatch.j2 as one srun task per GPU (or
per node on CPU clusters). Needs only Python 3 and torch. Prints one line per check:

    AZBENCH_HEALTH {"node": "node1", "check": "disk", "status": "ok", "value": 812.4, "detail": ""}

Per node (local rank 0 only): free disk under --dir, available memory, and on GPU nodes the GPU
count and uncorrectable ECC (nvidia-smi), XID lines in dmesg, and active InfiniBand ports. Across
all ranks: an all-reduce bus-bandwidth test (NCCL on GPUs, gloo on CPUs) against --expected-busbw
with warn/fail fractions. Test switch: AZBENCH_HEALTH_FAULT_NODES=node2,node3 fails those nodes'
"injected" check (how azbench's fault tests make a node unhealthy).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import time
from datetime import timedelta


def report(node: str, check: str, status: str, value: float | None = None, detail: str = "") -> None:
    line = {"node": node, "check": check, "status": status, "value": value, "detail": detail[:300]}
    print("AZBENCH_HEALTH " + json.dumps(line), flush=True)


def node_checks(args: argparse.Namespace, node: str) -> None:
    faulty = {n for n in os.environ.get("AZBENCH_HEALTH_FAULT_NODES", "").split(",") if n}
    if node in faulty:
        report(node, "injected", "fail", None, "AZBENCH_HEALTH_FAULT_NODES names this node")
    free_gb = shutil.disk_usage(args.dir).free / 1e9
    report(node, "disk", "ok" if free_gb >= args.min_disk_gb else "fail", round(free_gb, 2),
           f"free GB under {args.dir} (need {args.min_disk_gb})")
    mem_gb = _mem_available_gb()
    report(node, "memory", "ok" if mem_gb is None or mem_gb >= args.min_mem_gb else "fail",
           mem_gb, f"MemAvailable GB (need {args.min_mem_gb})")
    if args.gpus > 0:
        gpu_checks(args, node)


def gpu_checks(args: argparse.Namespace, node: str) -> None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=60)
        rows = [r.split(",") for r in out.stdout.strip().splitlines() if r.strip()]
        ok = out.returncode == 0 and len(rows) == args.gpus
        report(node, "gpu_count", "ok" if ok else "fail", len(rows),
               f"nvidia-smi sees {len(rows)} of {args.gpus} GPUs {out.stderr.strip()}")
        ecc = sum(int(r[1]) for r in rows if len(r) > 1 and r[1].strip().isdigit())
        report(node, "ecc", "ok" if ecc == 0 else "fail", ecc, "uncorrectable volatile ECC errors")
    except (OSError, subprocess.TimeoutExpired) as exc:
        report(node, "gpu_count", "fail", 0, f"nvidia-smi failed: {exc}")
    dmesg = subprocess.run(["dmesg"], capture_output=True, text=True)
    if dmesg.returncode != 0:
        report(node, "xid", "warn", None, "dmesg not readable: " + dmesg.stderr.strip())
    else:
        xids = [ln for ln in dmesg.stdout.splitlines() if "Xid" in ln]
        report(node, "xid", "ok" if not xids else "fail", len(xids), xids[-1] if xids else "")
    states = [open(p).read().strip() for p in glob.glob("/sys/class/infiniband/*/ports/*/state")]
    active = sum("ACTIVE" in s for s in states)
    report(node, "ib_ports", "ok" if active >= args.ib_ports else "fail", active,
           f"{active} of {len(states)} IB ports ACTIVE (need {args.ib_ports})")


def allreduce_check(args: argparse.Namespace, node: str, rank: int, world: int, local: int) -> None:
    import torch
    import torch.distributed as dist

    gpu = args.gpus > 0
    if gpu:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world,
                            init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                            timeout=timedelta(seconds=args.timeout))
    numel = int(args.size_mb * 1e6 / 4)
    buf = torch.ones(numel, dtype=torch.float32, device="cuda" if gpu else "cpu")
    dist.all_reduce(buf)  # warm-up: connections and buffers
    if gpu:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(buf)
    if gpu:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.iters
    busbw = 2 * (world - 1) / world * numel * 4 / seconds / 1e9 if world > 1 else 0.0
    if rank == 0:
        status, why = "ok", "GB/s bus bandwidth"
        if args.expected_busbw > 0 and world > 1:
            frac = busbw / args.expected_busbw
            status = "fail" if frac < args.fail_frac else "warn" if frac < args.warn_frac else "ok"
            why = f"GB/s = {frac:.0%} of expected {args.expected_busbw} GB/s"
        report("*", "allreduce_busbw", status, round(busbw, 3), f"{why} over {world} ranks")
    dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default=".")
    p.add_argument("--min-disk-gb", type=float, default=1.0)
    p.add_argument("--min-mem-gb", type=float, default=0.5)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--ib-ports", type=int, default=0)
    p.add_argument("--expected-busbw", type=float, default=0.0)
    p.add_argument("--warn-frac", type=float, default=0.9)
    p.add_argument("--fail-frac", type=float, default=0.75)
    p.add_argument("--size-mb", type=float, default=4.0)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()
    rank, world = int(os.environ.get("SLURM_PROCID", 0)), int(os.environ.get("SLURM_NTASKS", 1))
    local = int(os.environ.get("SLURM_LOCALID", 0))
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    if local == 0:
        node_checks(args, node)
    try:
        allreduce_check(args, node, rank, world, local)
    except Exception as exc:  # any failure of the collective is a verdict, not a crash
        report(node, "allreduce", "fail", None, f"{type(exc).__name__}: {exc}")
        return 1
    report(node, "done", "ok")
    return 0


def _mem_available_gb() -> float | None:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return round(int(line.split()[1]) / 1e6, 2)
    except OSError:
        pass
    return None


if __name__ == "__main__":
    raise SystemExit(main())
