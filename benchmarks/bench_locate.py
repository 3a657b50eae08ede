"""`azbench fabric locate` on the local cluster (issue 46): N emulated nodes (default 16), each with
its own link, one of them (node7) shaped to 20 Mbit/s, then a clean cluster of the same size.

Figures: `up` wall time; locate's wall time, rounds and collectives; each round's wall time; who
was named; and as the baseline measured in the same run, one 2-node collective alone (a round
of one pair), so the pair round's ratio to it says what running N/2 pairs side by side on this
machine's shared cores costs. Needs root, iproute2, slurm-wlm and munge. Prints JSON lines; asserts
nothing. Run: python benchmarks/bench_locate.py [N]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.harness import emit  # noqa: E402


def azbench(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True,
                          env={**os.environ, "AZBENCH_HOME": str(home), **(env or {})}, timeout=1800)
    return done.returncode, done.stdout, time.perf_counter() - start


def one(nodes: int, faults: str | None) -> None:
    label = "faulted" if faults else "clean"
    with tempfile.TemporaryDirectory(prefix="bench-locate-") as tmp:
        home = Path(tmp)
        env = {"AZBENCH_LOCAL_LINK_FAULTS": faults} if faults else {"AZBENCH_LOCAL_LINKS": "1"}
        code, _, up_s = azbench(home, "up", "--provider", "local", "--name", "bl", "--nodes", str(nodes), env=env)
        if code:
            raise SystemExit(f"up failed (exit {code})")
        try:
            emit(f"locate_{label}_up", up_s, "s", nodes=nodes)
            _, out, _ = azbench(home, "fabric", "locate", "--nodes", "node1,node2", "-o", "json")
            alone = json.loads(out)
            base = next((r["wall_s"] for r in alone["results"] if r["kind"] == "pairs"), None)
            _, out, wall = azbench(home, "fabric", "locate", "-o", "json")
            report = json.loads(out)
            pairs = next((r["wall_s"] for r in report["results"] if r["kind"] == "pairs"), None)
            emit(f"locate_{label}_wall", report["wall_s"], "s", nodes=nodes, rounds=report["rounds"],
                 tests=report["tests"], named=[s["node"] for s in report["suspects"]], command_s=round(wall, 2),
                 rounds_s=[(r["kind"], r["wall_s"]) for r in report["results"]],
                 one_pair_alone_s=base, pair_round_over_one_pair=(pairs / base) if pairs and base else None,
                 load=os.getloadavg()[0])
        finally:
            azbench(home, "down", "bl")


def main() -> None:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    one(nodes, "node7=rate 20mbit")
    one(nodes, None)


if __name__ == "__main__":
    main()
