#!/usr/bin/env python3
"""azbench spot agent: turn an Azure Scheduled Events `Preempt` notice into a checkpoint.

One small process per GPU node (a systemd unit from cloud-init on Azure; one process per emulated
node in azbench's local tests). Python 3 standard library only. Every --interval seconds it reads
the instance's scheduled events (IMDS, `GET <endpoint>/metadata/scheduledevents`, header
`Metadata: true`). For each `Preempt` event that names this VM (or names no VM), once per EventId:

  1. drains this node in Slurm with the reason "azbench-preempt <EventId>": no new job lands here,
     and azbench classifies the attempt running here as a preemption (infra, retried) from it;
  2. sends SIGUSR1 to the steps of every job running on this node (`scancel --signal=USR1`): the
     smoke recipe checkpoints at the end of its current step and exits 75; the MLPerf launch
     wrapper passes the signal on to its trainer;
  3. waits until those jobs have left the node, or until the notice is nearly spent
     (NotBefore - --margin, or --max-wait when the event has no NotBefore);
  4. acknowledges the event (`POST StartRequests` with its EventId) so Azure evicts right away.

Each step prints one line starting with "azbench-spot:". Exit: 0 on SIGTERM/SIGINT or --once.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from email.utils import parsedate_to_datetime

API = "api-version=2020-07-01"
DEFAULT_ENDPOINT = "http://169.254.169.254"
ENDPOINT_ENV = "AZBENCH_IMDS_ENDPOINT"
PREEMPT_REASON = "azbench-preempt"  # orchestrator/runs/failures.py reads this drain reason


def log(message: str) -> None:
    print(f"azbench-spot: {message}", file=sys.stderr, flush=True)


def imds(endpoint: str, path: str, body: dict | None = None, timeout: float = 5.0) -> dict | str:
    """One IMDS call (never through a proxy: IMDS is link-local); JSON decoded when it is JSON."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{endpoint.rstrip('/')}{path}", data=data,
                                 headers={"Metadata": "true", "Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        text = resp.read().decode()
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text.strip()


def instance_name(endpoint: str, fallback: str) -> str:
    """This VM's name as scheduled events list it (a scale-set VM is '<set>_<instance id>')."""
    try:
        name = imds(endpoint, "/metadata/instance/compute/name?api-version=2021-02-01&format=text")
        return name if isinstance(name, str) and name else fallback
    except (OSError, ValueError):
        return fallback


def slurm(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        log(f"{shlex.join(argv)} failed: {(out.stderr or out.stdout).strip()[:200]}")
    return out.stdout


def running_jobs(node: str) -> list[str]:
    return slurm(["squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%A"]).split()


def deadline_of(event: dict, margin: float, max_wait: float, now: float) -> float:
    """When to acknowledge at the latest: NotBefore - margin, else now + max_wait."""
    raw = event.get("NotBefore") or ""
    try:
        return min(parsedate_to_datetime(raw).timestamp() - margin, now + max_wait)
    except (TypeError, ValueError):
        return now + max_wait


def handle(event: dict, args: argparse.Namespace) -> None:
    """Drain, signal the jobs, wait for them (bounded), acknowledge: see the module docstring."""
    event_id = event["EventId"]
    log(f"Preempt {event_id} for {args.node} (NotBefore {event.get('NotBefore') or 'unset'})")
    slurm(["scontrol", "update", f"NodeName={args.node}", "State=DRAIN",
           f"Reason={PREEMPT_REASON} {event_id}"])
    jobs = running_jobs(args.node)
    for job in jobs:
        slurm(["scancel", "--signal=USR1", job])
    log(f"drained {args.node}; SIGUSR1 to job(s) {', '.join(jobs) or 'none'}")
    until = deadline_of(event, args.margin, args.max_wait, time.time())
    while jobs and time.time() < until:
        jobs = [j for j in running_jobs(args.node) if j in jobs]
        time.sleep(args.interval)
    imds(args.endpoint, f"/metadata/scheduledevents?{API}",
         {"StartRequests": [{"EventId": event_id}]})
    log(f"acknowledged {event_id}" + (f" with job(s) {', '.join(jobs)} still running" if jobs else ""))


def poll_once(args: argparse.Namespace, handled: set[str]) -> None:
    doc = imds(args.endpoint, f"/metadata/scheduledevents?{API}")
    for event in (doc.get("Events") or []) if isinstance(doc, dict) else []:
        mine = not event.get("Resources") or args.instance in event["Resources"]
        if event.get("EventType") == "Preempt" and mine and event.get("EventId") not in handled:
            handle(event, args)  # raises before the ack on failure: the next poll tries again
            handled.add(event["EventId"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="azbench spot agent (Azure Scheduled Events -> Slurm)")
    p.add_argument("--node", default=socket.gethostname().split(".")[0], help="Slurm node name")
    p.add_argument("--instance", default=None, help="VM name in events (default: from IMDS)")
    p.add_argument("--endpoint", default=os.environ.get(ENDPOINT_ENV, DEFAULT_ENDPOINT),
                   help=f"IMDS base URL (env {ENDPOINT_ENV})")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    p.add_argument("--margin", type=float, default=5.0, help="acknowledge this long before NotBefore")
    p.add_argument("--max-wait", type=float, default=25.0, help="longest wait for the jobs to stop")
    p.add_argument("--once", action="store_true", help="poll once and exit (for tests)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.instance = args.instance or instance_name(args.endpoint, args.node)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    handled: set[str] = set()
    log(f"watching {args.endpoint} for {args.instance} (Slurm node {args.node})")
    while True:
        try:
            poll_once(args, handled)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            log(f"poll failed: {exc}")  # IMDS restarts and Slurm hiccups pass: keep polling
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
