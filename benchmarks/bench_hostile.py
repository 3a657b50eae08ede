"""Hostile input, bounded: time and peak memory of the heavy cases (issue 22, point 7).

Prints one JSON line per case and never asserts. Usage: python benchmarks/bench_hostile.py [MB]
(MB: size of the big logs, default 500). Inputs are generated in a temp dir and deleted after.

Targets (issue 22): a 500 MB log, normal or one long line, in < 10 s and < 200 MB peak RSS;
any spec error in < 1 s and < 100 MB. Each case runs in its own process, whose peak RSS is
read from os.wait4's rusage (Linux ru_maxrss is in KiB) and whose address space is capped at
2 GiB so that a regression fails fast instead of eating the machine. Baselines measured in the
same run: `python_baseline` (the interpreter with azbench imported, doing nothing) and
`azbench --help`, the floor under every CLI figure. `cpu_s` (user + system) is reported beside
wall seconds: on a shared, busy machine wall time mostly measures the queue for a core.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import emit  # noqa: E402

AS_LIMIT = 2 << 30
TIMEOUT_S = 120  # a log case; a spec case gets SPEC_TIMEOUT_S (a FIFO spec may block forever)
SPEC_TIMEOUT_S = 20


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def measure(argv: list[str], env: dict[str, str], timeout: float = TIMEOUT_S) -> dict[str, object]:
    """Wall seconds, peak RSS (MB) and exit code of one child process (killed past `timeout`)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=_cap, cwd=ROOT)
    deadline, killed = start + timeout, False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            killed = True
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    lines = [line for line in err.splitlines() if line.strip()]
    return {"seconds": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "exit": os.waitstatus_to_exitcode(status), "killed_at_timeout": killed,
            "stderr_lines": len(lines),
            "stderr_last": lines[-1][:160] if lines else ""}


def write_normal_log(path: Path, size: int) -> None:
    """A big multi-node Slurm log: rank-prefixed MLLOG lines, framework chatter, a step per 100
    lines and an eval every 100 steps, between a real run_start and run_stop."""
    def line(key: str, t: int, value: object = None, **meta: object) -> str:
        body = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key,
                "value": value, "metadata": {"file": "train.py", "lineno": 1, **meta}}
        return f"0: :::MLLOG {json.dumps(body)}\n"

    head = "".join([line("submission_benchmark", 1, "gpt3"), line("global_batch_size", 1, 2048),
                    line("run_start", 1_700_000_000_000)])
    chatter = [f"{r}: node{r % 64:03d}:{r}:{r} [0] NCCL INFO Channel 03/0 : {r} -> {r + 1} via P2P/IPC\n"
               for r in range(40)]
    cache = [line("cache_clear", 1_700_000_000_000 + r, True) for r in range(40)]
    written, step, t = 0, 0, 1_700_000_000_000
    with path.open("w") as fh:
        fh.write(head)
        while written < size:
            step += 1
            t += 900
            block = chatter + cache + [line("tracked_stats", t, {"train_step_time": 0.9}, step=step)]
            if step % 100 == 0:
                block.append(line("eval_accuracy", t, 0.5 + step / 1e7, samples_count=step * 2048))
            text = "".join(block)
            fh.write(text)
            written += len(text)
        fh.write(line("run_stop", t + 1000, None, status="success"))


def write_long_line_log(path: Path, size: int) -> None:
    """One line of `size` bytes with no newline until its end, between a run_start and a run_stop."""
    with path.open("wb") as fh:
        fh.write(b':::MLLOG {"key": "run_start", "value": null, "time_ms": 1000}\n:::MLLOG {"x": "')
        block = b"x" * (1 << 22)
        for _ in range(size // len(block)):
            fh.write(block)
        fh.write(b'"}\n:::MLLOG {"key": "run_stop", "value": null, "time_ms": 61000, '
                 b'"metadata": {"status": "success"}}\n')


def spec_cases(tmp: Path) -> dict[str, Path]:
    """Spec files that must fail fast: an alias bomb, deep nesting, 100 MB, /dev/zero, a FIFO."""
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        bomb.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    (tmp / "bomb.yaml").write_text("name: bomb\nnodes: 1\n" + "\n".join(bomb) + "\n")
    (tmp / "deep.yaml").write_text("name: deep\nnodes: 1\nx: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with (tmp / "big.yaml").open("w") as fh:
        fh.write("name: big\nnodes: 1\nlocal:\n")
        fh.writelines(f"  k{i}: {'v' * 80}\n" for i in range(1_100_000))
    (tmp / "dupe.yaml").write_text("name: a\nname: b\nnodes: 1\n")
    os.mkfifo(tmp / "fifo.yaml")
    return {"alias_bomb": tmp / "bomb.yaml", "deep_nesting": tmp / "deep.yaml",
            "100mb_yaml": tmp / "big.yaml", "duplicate_keys": tmp / "dupe.yaml",
            "dev_zero": Path("/dev/zero"), "fifo": tmp / "fifo.yaml"}


def main() -> int:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="azbench-hostile-") as name:
        tmp = Path(name)
        env = {**os.environ, "AZBENCH_HOME": str(tmp / "home")}
        env.pop("AZBENCH_DB_URL", None)
        env.pop("AZBENCH_DEBUG", None)
        base = measure([py, "-c", "import orchestrator.results.importer"], env)
        emit("python_baseline", float(base["seconds"]), "s", **base)
        helped = measure([py, "-m", "orchestrator", "--help"], env)
        emit("cli_help_baseline", float(helped["seconds"]), "s", **helped)
        for case, writer in (("normal", write_normal_log), ("one_long_line", write_long_line_log)):
            folder = tmp / case / "gpt3"
            folder.mkdir(parents=True)
            log = folder / "result_0.txt"
            writer(log, mb << 20)
            size_mb = round(log.stat().st_size / 1e6, 1)
            parse = measure([py, "-c", "import sys; from orchestrator.results.mllog import "
                             "parse_file; parse_file(__import__('pathlib').Path(sys.argv[1]))",
                             str(log)], env)
            emit(f"log_{case}_parse", float(parse["seconds"]), "s", mb=size_mb,
                 target_s=10, target_rss_mb=200, **parse)
            imported = measure([py, "-m", "orchestrator", "results", "import", "--no-compliance", str(folder)], env)
            emit(f"log_{case}_import", float(imported["seconds"]), "s", mb=size_mb,
                 target_s=10, target_rss_mb=200, **imported)
            log.unlink()
            for copy in (tmp / "home").rglob("*.log"):
                copy.unlink()  # the archived copy: keep the disk free for the next case
        for case, spec in spec_cases(tmp).items():
            result = measure([py, "-m", "orchestrator", "up", "--dry-run", "-f", str(spec)], env,
                             SPEC_TIMEOUT_S)
            emit(f"spec_{case}", float(result["seconds"]), "s", target_s=1,
                 target_rss_mb=100, **result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
