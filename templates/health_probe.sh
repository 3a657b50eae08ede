#!/bin/sh
# azbench node probe, run by `azbench health` (orchestrator/runs/fleet.py) as one Slurm task per
# node in every round of the gate. POSIX sh + awk only: no Python, no torch, so that a round over
# 2,048 emulated nodes on a 2-core machine stays light. Prints one line:
#
#   AZBENCH_PROBE node=node17 disk_gb=81.2 mem_gb=20.1 ops_per_s=5.1e+07 link_gbps=100 link=ok
#
# disk_gb/mem_gb: free disk under --dir and MemAvailable (the built-in per-node checks).
# ops_per_s: a fixed CPU loop, best of --reps repetitions, timed by the kernel's per-task CPU
#   clock (/proc/self/schedstat, read after a context switch so it is current): CPU time, not
#   wall time, so 2,048 probes sharing two cores still measure the node, not the queue.
# link_gbps/link: this node's side of a group collective. On GPU nodes the gate runs NCCL tests
#   for that instead; on emulated CPU nodes the fabric is modelled: --link-gbps for a healthy
#   link, divided by the slow factor on a slow node, "fail" on a bad one.
# Test switches (read from the environment srun passes on):
#   AZBENCH_HEALTH_SLOW_NODES=node17,node1900  those nodes run the loop AZBENCH_HEALTH_SLOW_FACTOR
#                                              (default 2) times slower and their links as much
#   AZBENCH_HEALTH_BAD_NODES=node5             collectives that include node5 fail
# On GPU nodes with Azure's azurehpc-health-checks installed (--ahc PATH), its output is
# forwarded as AZBENCH_AHC lines for the gate to parse.
set -u
DIR=.; REPS=5; ITERS=20000; LINK=100; AHC=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --link-gbps) LINK=$2; shift 2 ;;
    --ahc) AHC=$2; shift 2 ;;
    *) echo "health_probe.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
NODE=${SLURMD_NODENAME:-$(hostname -s)}
listed() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; }
FACTOR=1
if listed "$NODE" "${AZBENCH_HEALTH_SLOW_NODES:-}"; then FACTOR=${AZBENCH_HEALTH_SLOW_FACTOR:-2}; fi
DISK=$(df -Pk "$DIR" 2>/dev/null | awk 'NR==2 {printf "%.2f", $4 / 1e6}')
MEM=$(awk '/^MemAvailable:/ {printf "%.2f", $2 / 1e6}' /proc/meminfo)
OPS=$(awk -v reps="$REPS" -v iters="$ITERS" -v factor="$FACTOR" '
  function cpu_ns(  line, f) {
    system("")  # blocks on a child: the kernel brings this task'"'"'s CPU clock up to date
    getline line < "/proc/self/schedstat"; close("/proc/self/schedstat")
    split(line, f, " "); return f[1]
  }
  BEGIN {
    n = int(iters * factor); best = 0
    for (r = 0; r < reps; r++) {
      start = cpu_ns(); for (i = 0; i < n; i++) x += i; d = cpu_ns() - start
      if (d > 0 && (best == 0 || d < best)) best = d
    }
    if (best > 0) printf "%.4g", iters / (best / 1e9); else printf "nan"
  }')
LINK_STATE=ok
if listed "$NODE" "${AZBENCH_HEALTH_BAD_NODES:-}"; then LINK_STATE=fail; fi
LINK=$(awk -v l="$LINK" -v f="$FACTOR" 'BEGIN {printf "%.4g", l / f}')
if [ -n "$AHC" ] && [ -x "$AHC" ]; then
  "$AHC" 2>&1 | sed "s|^|AZBENCH_AHC $NODE |"
fi
echo "AZBENCH_PROBE node=$NODE disk_gb=${DISK:-nan} mem_gb=${MEM:-nan} ops_per_s=$OPS link_gbps=$LINK link=$LINK_STATE"
