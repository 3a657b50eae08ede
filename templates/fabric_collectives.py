"""azbench's CPU collectives: all_reduce, all_gather, reduce_scatter, alltoall and sendrecv through
torch.distributed (gloo), run by templates/fabric_test.sbatch.j2 as one srun task per rank (two
per node, so one node measures something). Needs only Python 3 and torch.

Rank 0 prints each collective's run in nccl-tests' own format (NVIDIA/nccl-tests src/util.cu: the
"# Collective test starting" line, the "# nThread ... nGpus" header, one "#  Rank N Group 0 Pid P
on HOST device D [cpu] ..." line per rank, the size table, "# Out of bounds values" and "# Avg bus
bandwidth"), so azbench reads nccl-tests outputs and these with one parser
(orchestrator/fabric/nccltests.py). Sizes, algbw and busbw follow nccl-tests doc/PERFORMANCE.md:
S is the whole array (all_gather: every rank's part; reduce_scatter: every rank's input), algbw =
S/t, busbw = algbw x BUS_FACTOR (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter
and alltoall, 1 for sendrecv). torch's all_reduce works in place: its figures fill the in-place
columns; the others write a separate output and fill the out-of-place ones; the column it does not
run says N/A. Each size is checked once before it is timed (rank-specific values), and #wrong
counts the elements that differ.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from datetime import timedelta

NUMERATOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "alltoall": 1, "sendrecv": 0}
IN_PLACE = {"all_reduce"}
UNITS = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}


def bus_factor(collective: str, n: int) -> float:
    num = NUMERATOR[collective]
    return 1.0 if num == 0 else num * (n - 1) / n


def parse_size(text: str) -> int:
    text = text.strip().upper()
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, size = [], lo
    while size <= hi:
        out.append(size)
        size *= factor
    return out


def run_one(dist, torch, name: str, nbytes: int, rank: int, n: int, iters: int, warmup: int) -> tuple[int, int, float, int]:
    """(actual bytes, elements per rank's array, seconds per op, wrong elements) of one size."""
    count = max(n, (nbytes // 4) // n * n)  # float32 elements of the whole array, a multiple of n
    part = count // n
    if name == "all_reduce":
        buf = torch.full((count,), float(rank + 1))
        op = lambda: dist.all_reduce(buf)  # noqa: E731
        expect = n * (n + 1) / 2

        def check() -> int:
            buf.fill_(float(rank + 1))
            op()
            return int((buf != expect).sum())
    elif name == "all_gather":
        inp, out = torch.full((part,), float(rank + 1)), torch.empty(count)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # torch deprecates the older name
        op = lambda: gather(out, inp)  # noqa: E731
        want = torch.arange(1, n + 1, dtype=torch.float32).repeat_interleave(part)

        def check() -> int:
            op()
            return int((out != want).sum())
    elif name == "reduce_scatter":
        inp, out = torch.full((count,), float(rank + 1)), torch.empty(part)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        op = lambda: scatter(out, inp)  # noqa: E731

        def check() -> int:
            op()
            return int((out != n * (n + 1) / 2).sum())
    elif name == "alltoall":
        inp = torch.arange(n, dtype=torch.float32).repeat_interleave(part) + 1000 * rank
        out = torch.empty(count)
        op = lambda: dist.all_to_all_single(out, inp)  # noqa: E731
        want = torch.arange(n, dtype=torch.float32).mul(1000).add(rank).repeat_interleave(part)

        def check() -> int:
            op()
            return int((out != want).sum())
    else:  # sendrecv: the whole array to the next rank, from the previous one
        send, recv = torch.full((count,), float(rank)), torch.empty(count)

        def op() -> None:
            for req in (dist.isend(send, (rank + 1) % n), dist.irecv(recv, (rank - 1) % n)):
                req.wait()

        def check() -> int:
            op()
            return int((recv != float((rank - 1) % n)).sum())
    wrong = check()
    for _ in range(warmup):
        op()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        op()
    seconds = (time.perf_counter() - start) / iters
    return count * 4, count, seconds, wrong


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--collectives", default="all_reduce")
    p.add_argument("-b", "--minbytes", default="1K")
    p.add_argument("-e", "--maxbytes", default="1M")
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=5)
    p.add_argument("-w", "--warmup", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args()
    import torch
    import torch.distributed as dist

    rank, n = int(os.environ.get("SLURM_PROCID", 0)), int(os.environ.get("SLURM_NTASKS", 1))
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n, timeout=timedelta(seconds=args.timeout),
                            init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
    who: list[object] = [None] * n
    dist.all_gather_object(who, (rank, os.getpid(), host, int(os.environ.get("SLURM_LOCALID", 0))))
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    out = sys.stdout.write
    for name in [c for c in args.collectives.split(",") if c]:
        rows = [run_one(dist, torch, name, size, rank, n, args.iters, args.warmup)
                for size in sizes(lo, hi, args.stepfactor)]
        wrong = torch.tensor([w for *_, w in rows], dtype=torch.int64)
        dist.all_reduce(wrong)  # every rank's wrong elements, as nccl-tests sums them
        if rank != 0:
            continue
        out(f"# azbench fabric_collectives.py: torch.distributed {torch.__version__} (gloo, CPU)\n"
            f"# Collective test starting: {name}_perf\n"
            f"# nThread 1 nGpus 0 minBytes {lo} maxBytes {hi} step: {args.stepfactor}(factor) warmup iters: "
            f"{args.warmup} iters: {args.iters} agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
        for r, pid, node, local in sorted(who):  # type: ignore[misc]
            out(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {node:>10s} device {local:2d} [cpu] cpu (gloo)\n")
        out("#\n#" + " " * 62 + "out-of-place                       in-place\n")
        out(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  "
            + "  ".join(f"{'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}" for _ in (0, 1)) + "\n")
        out(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  "
            + "  ".join(f"{'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}" for _ in (0, 1)) + "\n")
        busbws, total_wrong = [], 0
        for (nbytes, count, seconds, _), bad in zip(rows, wrong.tolist()):
            algbw = nbytes / seconds / 1e9
            busbw = algbw * bus_factor(name, n)
            busbws.append(busbw)
            total_wrong += bad
            measured = f"{seconds * 1e6:7.2f}  {algbw:6.4g}  {busbw:6.4g}  {bad:6d}"
            missing = f"{'N/A':>7s}  {'N/A':>6s}  {'N/A':>6s}  {'N/A':>6s}"
            redop = "sum" if name in ("all_reduce", "reduce_scatter") else "none"
            cols = (missing, measured) if name in IN_PLACE else (measured, missing)
            out(f"  {nbytes:10d}  {count:12d}  {'float':>8s}  {redop:>6s}  {-1:6d}  {cols[0]}  {cols[1]}\n")
        avg = sum(busbws) / len(busbws) if busbws else 0.0
        out(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}\n"
            f"# Avg bus bandwidth    : {avg:g} \n#\n# Collective test concluded: {name}_perf\n")
        sys.stdout.flush()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
