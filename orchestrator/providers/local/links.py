"""Each emulated node's own network link, and the faults that degrade one: network namespaces,
a veth per node on a bridge, shaped with `tc`.

Built by `up` when `AZBENCH_LOCAL_LINKS=1` or `AZBENCH_LOCAL_LINK_FAULTS` is set (and torn down by
`down`), as testsupport/vm_emulator.py gives each emulated Azure VM its network: a namespace
`azbl-<tag>-fab` holds bridge br0; node N gets namespace `azbl-<tag>-N` with eth0 (LINK_NET,
private, and only ever inside these namespaces) whose peer sits on the bridge. slurmd stays on
loopback (the control plane); a job's tasks reach their node's link through the cluster's
python (`bin/python` in the cluster dir, Access.python): it enters the namespace of the node it
runs on (SLURMD_NODENAME), sets GLOO_SOCKET_IFNAME=eth0, and turns a loopback or node-name
MASTER_ADDR into the first node's link address. Nothing there names a fault.

`AZBENCH_LOCAL_LINK_FAULTS="node7=rate 20mbit; node9=rate 100mbit delay 5ms"` shapes those links
for the cluster's life: `rate` with a token bucket (tc-tbf(8)) on both ends of the veth;
`delay` needs netem (tc-netem(8)), applied only where the kernel has it, else a note says so.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator.errors import ConfigError

FAULTS_VAR = "AZBENCH_LOCAL_LINK_FAULTS"
LINKS_VAR = "AZBENCH_LOCAL_LINKS"
LINK_NET = "10.77"  # /16 inside the cluster's own namespaces only; node i is 10.77.(i/250).(i%250+1)
_RATE = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,3})?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")
_DELAY = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,3})?(us|ms|s)$")
_NODE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,40}$")


class LinkFault(BaseModel):
    """One node's degraded link as asked: a rate limit, a delay, or both."""

    rate: str | None = None
    delay: str | None = None

    def text(self) -> str:
        return " ".join(f"{k} {v}" for k, v in (("rate", self.rate), ("delay", self.delay)) if v)


class Links(BaseModel):
    """What `up` built (state.json keeps it): the namespace prefix, each node's address, the
    faults applied and the notes (what could not be applied, and why)."""

    prefix: str = ""
    addresses: dict[str, str] = Field(default_factory=dict)
    faults: dict[str, LinkFault] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def built(self) -> bool:
        return bool(self.addresses)


def wanted(env: dict[str, str] | None = None) -> bool:
    """True when `up` should give each node its own link (either switch set)."""
    env = dict(os.environ) if env is None else env
    return bool(env.get(FAULTS_VAR, "").strip()) or env.get(LINKS_VAR, "").strip() in ("1", "true", "yes")


def parse_faults(text: str, nodes: list[str] | None = None) -> dict[str, LinkFault]:
    """`node7=rate 20mbit; node9=delay 5ms` (`;` or `,` between nodes); ConfigError naming the
    first bad entry, or a node the cluster does not have."""
    out: dict[str, LinkFault] = {}
    for item in (p.strip() for p in re.split(r"[;,]", text) if p.strip()):
        node, sep, spec = item.partition("=")
        node = node.strip()
        if not sep or not _NODE.match(node):
            raise ConfigError(f"{FAULTS_VAR}: {item[:60]!r} is not NODE=rate R|delay D")
        if nodes is not None and node not in nodes:
            raise ConfigError(f"{FAULTS_VAR}: no node {node} in this cluster ({nodes[0]}..{nodes[-1]})")
        words = spec.split()
        terms: dict[str, str] = {}
        for key, value in zip(words[::2], words[1::2]):
            pattern = {"rate": _RATE, "delay": _DELAY}.get(key)
            if pattern is None or not pattern.match(value.lower()):
                raise ConfigError(f"{FAULTS_VAR}: {node}: {key} {value[:20]!r} is not rate <n>mbit|kbit|gbit "
                                  f"or delay <n>ms|us|s")
            terms[key] = value.lower()
        if not terms or len(words) % 2:
            raise ConfigError(f"{FAULTS_VAR}: {item[:60]!r} is not NODE=rate R|delay D")
        out[node] = LinkFault(**terms)
    return out


def unavailable() -> str | None:
    """Why links cannot be built here, or None: they need root (network namespaces) and iproute2."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_SYS_ADMIN"
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    return f"{' and '.join(missing)} not found (iproute2)" if missing else None


@dataclass
class _Ip:
    """Runs ip/tc commands, keeping the first failure's message."""

    errors: list[str] = field(default_factory=list)

    def __call__(self, *argv: str, check: bool = True) -> bool:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
        if done.returncode and check:
            self.errors.append(f"{shlex.join(argv)}: {(done.stderr or done.stdout).strip()[:200]}")
        return done.returncode == 0


def build(tag: str, nodes: list[str], faults: dict[str, LinkFault]) -> Links:
    """The namespaces, bridge and veths for `nodes`, faults applied. Where links cannot be built,
    a Links with no addresses and a note saying why (the cluster still comes up)."""
    why = unavailable()
    if why is not None:
        return Links(notes=[f"links not built: {why}; no link is shaped"])
    prefix = f"azbl-{tag}"
    ip = _Ip()
    teardown(Links(prefix=prefix, addresses={n: "" for n in nodes}))  # a crashed up's leftovers
    fab = f"{prefix}-fab"
    ip("ip", "netns", "add", fab)
    ip("ip", "-n", fab, "link", "add", "br0", "type", "bridge")
    ip("ip", "-n", fab, "link", "set", "br0", "up")
    links = Links(prefix=prefix)
    for i, node in enumerate(nodes):
        ns, veth, addr = f"{prefix}-{i}", f"lk{tag[:6]}{i}", f"{LINK_NET}.{i // 250}.{i % 250 + 1}"
        ip("ip", "netns", "add", ns)
        ip("ip", "-n", ns, "link", "set", "lo", "up")
        ip("ip", "-n", fab, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("ip", "-n", fab, "link", "set", veth, "master", "br0", "up")
        ip("ip", "-n", ns, "addr", "add", f"{addr}/16", "dev", "eth0")
        ip("ip", "-n", ns, "link", "set", "eth0", "up")
        links.addresses[node] = addr
        if node in faults:
            links.notes += _shape(ip, [(ns, "eth0"), (fab, veth)], node, faults[node])
            links.faults[node] = faults[node]
        if ip.errors:
            teardown(links)
            return Links(notes=[f"links not built: {ip.errors[0]}; no link is shaped"])
    return links


def teardown(links: Links) -> None:
    """Remove the namespaces `build` made (their veths and qdiscs go with them); idempotent."""
    if not links.prefix:
        return
    for i in range(len(links.addresses)):
        subprocess.run(["ip", "netns", "del", f"{links.prefix}-{i}"], capture_output=True, timeout=30)
    subprocess.run(["ip", "netns", "del", f"{links.prefix}-fab"], capture_output=True, timeout=30)


def namespace(links: Links, node: str) -> str | None:
    """The namespace of `node`'s link, or None."""
    names = list(links.addresses)
    return f"{links.prefix}-{names.index(node)}" if node in links.addresses else None


def write_python(path: Path, python: str, links: Links, first_node: str) -> None:
    """The cluster's python (see the module docstring): a shell script entering the node's
    namespace; the plain interpreter where no link was built. `first_node`: shell text printing
    the first node of the task's job (the scheduler's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cases = "\n".join(f"  {shlex.quote(n)}) NS={shlex.quote(namespace(links, n) or '')}; ADDR={a} ;;"
                      for n, a in links.addresses.items())
    addrs = "\n".join(f"    {shlex.quote(n)}) MASTER_ADDR={a} ;;" for n, a in links.addresses.items())
    text = f"""#!/bin/sh
# azbench local cluster: run python inside the link (network namespace) of the node this task
# runs on (providers/local/links.py). Generated at `up`; names no fault.
NS=""
case "${{SLURMD_NODENAME:-}}" in
{cases}
esac
if [ -z "$NS" ] || [ ! -e "/run/netns/$NS" ]; then exec {shlex.quote(python)} "$@"; fi
export GLOO_SOCKET_IFNAME=eth0
case "${{MASTER_ADDR:-}}" in
  ""|127.0.0.1|localhost|::1)
    FIRST=$({first_node})
    MASTER_ADDR="$FIRST" ;;
esac
case "${{MASTER_ADDR:-}}" in
{addrs}
esac
export MASTER_ADDR
exec ip netns exec "$NS" {shlex.quote(python)} "$@"
"""
    path.write_text(text)
    path.chmod(0o755)


def _shape(ip: _Ip, ends: list[tuple[str, str]], node: str, fault: LinkFault) -> list[str]:
    """tc on both ends of `node`'s veth; notes for what this kernel cannot apply."""
    notes: list[str] = []
    delay = fault.delay
    for ns, dev in ends:
        parent = ["root"]
        if delay:
            if ip("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:",
                  "netem", "delay", delay, check=False):
                parent = ["parent", "1:1"]
            else:
                if not notes:
                    notes.append(f"{node}: delay {delay} not applied: this kernel has no netem (tc-netem)")
                delay = None
        if fault.rate:
            ip("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, *parent, "tbf", "rate", fault.rate,
               "burst", "32kbit", "latency", "400ms")
    return notes


__all__ = ["FAULTS_VAR", "LINKS_VAR", "LinkFault", "Links", "wanted", "parse_faults", "unavailable", "build",
           "teardown", "namespace", "write_python"]
