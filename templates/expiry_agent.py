"""azbench expiry agent: deletes an Azure cluster from its own head VM when it expires or idles.

Shipped to the head by cloud-init (templates/cloud-init-expiry.yaml.j2) and run by a systemd
timer every few minutes, so a cluster goes away on time even when the laptop that ran
`azbench up` is gone. Each run ("tick"):

1. reads the cluster's resource group from ARM; its `azbench-expires` tag is the deadline
   (`azbench extend` moves the tag, and so the deadline: nothing on the VM needs to change);
2. with `idle_minutes` set, asks Slurm for jobs (`squeue`): a job pending or running resets the
   idle clock (kept in `state_dir/last-busy`); a failed squeue does not reset it;
3. deletes the resource group (everything the cluster owns) when the deadline has passed, or
   when no job was seen for `idle_minutes`; otherwise leaves it alone.

It never deletes on a guess: a group that is not tagged `azbench-cluster=<cluster>` or whose
expiry tag is unreadable is kept. It signs in as the head VM's system-assigned managed identity
(azure-identity's ManagedIdentityCredential, through the instance metadata endpoint), whose only
role assignment is on the cluster's own resource group. Needs Python 3 plus azure-identity and
azure-mgmt-resource. Config: a JSON file (see `Config`). Prints one line per tick (journald).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

TAG_CLUSTER, TAG_EXPIRES = "azbench-cluster", "azbench-expires"
DEFAULT_CONFIG = "/etc/azbench/expiry.json"


@dataclass(frozen=True)
class Config:
    cluster: str
    subscription_id: str
    resource_group: str
    arm_endpoint: str = "https://management.azure.com"
    idle_minutes: Optional[int] = None
    state_dir: str = "/var/lib/azbench-expiry"

    @classmethod
    def load(cls, path: str) -> "Config":
        data = json.loads(Path(path).read_text())
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Decision:
    action: str  # keep | delete | gone
    reason: str


def decide(expires: Optional[datetime], now: datetime, idle: Optional[timedelta],
           idle_minutes: Optional[int]) -> Decision:
    """Pure: delete at the deadline (busy or not) or after idle_minutes without a job."""
    if expires is not None and now >= expires:
        return Decision("delete", f"expired at {expires:%Y-%m-%dT%H:%M:%SZ}")
    if idle_minutes and idle is not None and idle >= timedelta(minutes=idle_minutes):
        return Decision("delete", f"idle for {int(idle.total_seconds() // 60)} min "
                                  f"(limit {idle_minutes} min)")
    left = f"{int((expires - now).total_seconds() // 60)} min left" if expires else "no readable expiry"
    idle_text = f", idle {int(idle.total_seconds() // 60)} min" if idle is not None else ""
    return Decision("keep", left + idle_text)


def parse_time(text: Optional[str]) -> Optional[datetime]:
    """orchestrator.models.parse_utc, repeated: the agent runs alone on the head, without azbench."""
    if not text:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def slurm_busy(run: Callable[..., Any] = subprocess.run) -> Optional[bool]:
    """True when Slurm has a pending or running job, False when none, None when squeue failed."""
    try:
        out = run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return bool(out.stdout.strip())


def idle_time(state_dir: str, busy: Optional[bool], now: datetime) -> timedelta:
    """Time since a job was last seen; the first tick starts the clock (a fresh cluster is busy)."""
    path = Path(state_dir) / "last-busy"
    last = parse_time(path.read_text().strip()) if path.exists() else None
    if busy or last is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(now.strftime("%Y-%m-%dT%H:%M:%SZ") + "\n")
        return timedelta(0)
    return max(timedelta(0), now - last)


def tick(cfg: Config, client: Any, now: datetime, busy: Optional[bool], *, wait: bool = True) -> Decision:
    """One check; deletes the resource group when `decide` says so. `client`: ResourceManagementClient."""
    from azure.core.exceptions import ResourceNotFoundError
    try:
        group = client.resource_groups.get(cfg.resource_group)
    except ResourceNotFoundError:
        return Decision("gone", f"resource group {cfg.resource_group} no longer exists")
    tags = dict(group.tags or {})
    if tags.get(TAG_CLUSTER) != cfg.cluster:
        return Decision("keep", f"resource group {cfg.resource_group} is not tagged "
                                f"{TAG_CLUSTER}={cfg.cluster}: never deleted on a guess")
    idle = idle_time(cfg.state_dir, busy, now) if cfg.idle_minutes else None
    decision = decide(parse_time(tags.get(TAG_EXPIRES)), now, idle, cfg.idle_minutes)
    if decision.action == "delete":
        poller = client.resource_groups.begin_delete(cfg.resource_group)
        if wait:  # on the head the delete ends this VM first; the test fake lets it finish
            poller.result()
    return decision


def make_client(cfg: Config, **client_kwargs: Any) -> Any:
    """ARM client signed in as this VM's managed identity (IMDS)."""
    from azure.identity import ManagedIdentityCredential
    from azure.mgmt.resource.resources import ResourceManagementClient
    base = cfg.arm_endpoint.rstrip("/")
    return ResourceManagementClient(ManagedIdentityCredential(), cfg.subscription_id, base_url=base,
                                    credential_scopes=[f"{base}/.default"], **client_kwargs)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description="Delete this azbench cluster when it expires or idles.")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    args = parser.parse_args(argv)
    cfg = Config.load(args.config)
    now = datetime.now(timezone.utc)
    busy = slurm_busy() if cfg.idle_minutes else None
    try:
        decision = tick(cfg, make_client(cfg), now, busy, wait=False)
    except Exception as exc:  # one line for journald; the next tick tries again
        print(f"azbench-expiry: {cfg.cluster}: error: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        return 1
    print(f"azbench-expiry: {cfg.cluster}: {decision.action}: {decision.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
