"""NCCL_DEBUG=INFO logs read back: which network NCCL used, over which HCAs, with GPUDirect RDMA or
not, and the transport of every inter-node channel.

NCCL prints each line as "HOST:PID:TID [DEV] NCCL INFO <message>" (NCCL's debug.cc), alone or
inside a training or nccl-tests log, possibly behind a launcher's label ("0: ", "[1,0]<stdout>:").
The messages read here, as NCCL 2.x prints them:

- "Using network IB" / "Using network Socket" / "Using network IBext" (the net transport chosen;
  a plugin's name, e.g. "AWS Libfabric", appears here);
- "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.5<0>" (the HCAs, port and link
  layer), "NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.0.4<0>";
- "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", "P2P plugin
  IBext_v8", "Plugin Path : ..." (the net plugin);
- "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'" / "... Disabled for HCA ..." and "GPU Direct
  RDMA Disabled for GPU 42000 / HCA 0 (distance 6 > 4)";
- inter-node channels: "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" (older: "Channel
  00 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA", "Ring 00 : 15 -> 0 [send] via
  NET/Socket/0"); intra-node ones go "via P2P/..." or "via SHM/..." and are not counted.

Pure: text in, `NcclTransport` out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import Field

from orchestrator.models import Frozen
from orchestrator.fabric.nccltests import strip_prefix

_INFO = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+NCCL INFO\s+(?P<msg>.*)$")
_USING_NET = re.compile(r"^Using network\s+(.+?)\s*$")
_NET_IB = re.compile(r"^NET/(\w+)\s*:\s*Using\s+(.*?)(?:;\s*OOB\s+(\S+))?\s*$")
_HCA = re.compile(r"\[\d+\](\S+?):(\d+)/(\w+)")
_SOCKET_IF = re.compile(r"\[\d+\]([^:\s]+):")
_NO_DEVICE = re.compile(r"^NET/(\w+)\s*:\s*No device found")
_PLUGIN = re.compile(r"(?:P2P plugin|NET/Plugin\s*:\s*Loaded net plugin|Loaded net plugin)\s+(\S+)")
_NO_PLUGIN = re.compile(r"NET/Plugin\s*:\s*No plugin found")
_GDR = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for (?:GPU \S+ / )?HCA (\d+)(?:\s+'([^']+)')?")
_CHANNEL = re.compile(r"^(?:Channel|Ring)\s+(?P<ch>\d+)(?:/\d+)?\s*:\s*(?P<src>\S+)\s*->\s*(?P<dst>\S+)\s+"
                      r"\[(?P<dir>send|receive)\]\s+via\s+NET/(?P<net>[^/\s]+)(?:/(?P<dev>\d+))?(?P<rest>\S*)")
_VERSION = re.compile(r"NCCL version\s+(\S+)")


class Channel(Frozen):
    """One inter-node channel end: "[send]" or "[receive]" via NET/<net>/<dev>[/GDRDMA]."""

    host: str
    channel: int
    src: str
    dst: str
    direction: str
    net: str
    dev: int | None = None
    gdr: bool = False
    line: str = ""

    @property
    def transport(self) -> str:
        return f"NET/{self.net}" + ("/GDRDMA" if self.gdr else "")


class NcclTransport(Frozen):
    """What NCCL said about its network in one log."""

    nccl_version: str | None = None
    networks: list[str] = Field(default_factory=list, description="'Using network X' lines, in order of first sight")
    plugin: str | None = Field(None, description="the net plugin loaded; 'none' when NCCL said none was found")
    hcas: list[str] = Field(default_factory=list, description="HCA:port/link-layer as 'NET/IB : Using' lists them")
    socket_interfaces: list[str] = Field(default_factory=list)
    no_device: list[str] = Field(default_factory=list, description="nets that found no device ('NET/IB : No device found')")
    gdr_enabled: list[str] = Field(default_factory=list, description="HCAs with 'GPU Direct RDMA Enabled'")
    gdr_disabled: list[str] = Field(default_factory=list, description="HCAs with 'GPU Direct RDMA Disabled'")
    channels: list[Channel] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list, description="hosts that printed NCCL INFO lines")
    info_lines: int = 0

    @property
    def by_transport(self) -> dict[str, int]:
        """Inter-node channel ends per transport ("NET/IB/GDRDMA": 32, "NET/Socket": 4)."""
        return dict(Counter(c.transport for c in self.channels))

    @property
    def socket_channels(self) -> list[Channel]:
        return [c for c in self.channels if c.net.lower() == "socket"]

    @property
    def gdr(self) -> bool | None:
        """GPUDirect RDMA in use: True when a channel says GDRDMA or NCCL enabled it for an HCA;
        False when NCCL disabled it and no channel uses it; None when the log does not say."""
        if any(c.gdr for c in self.channels) or self.gdr_enabled:
            return True
        if self.gdr_disabled or self.channels:
            return False
        return None


def looks_like_log(text: str) -> bool:
    return any(_INFO.search(strip_prefix(line)) for line in text.splitlines())


def parse_log(text: str | Iterable[str]) -> NcclTransport:
    """The NCCL INFO lines of `text` (a whole file or its lines), summarised."""
    lines = text.splitlines() if isinstance(text, str) else text
    version: str | None = None
    networks: dict[str, None] = {}
    hcas: dict[str, None] = {}
    sockets: dict[str, None] = {}
    no_device: dict[str, None] = {}
    enabled: dict[str, None] = {}
    disabled: dict[str, None] = {}
    hosts: dict[str, None] = {}
    channels: list[Channel] = []
    plugin: str | None = None
    count = 0
    for raw in lines:
        line = strip_prefix(raw)
        if version is None and (v := _VERSION.search(line)) is not None:
            version = v.group(1)
        m = _INFO.search(line)
        if m is None:
            continue
        count += 1
        host, msg = m.group("host"), m.group("msg").strip()
        hosts.setdefault(host)
        if (u := _USING_NET.search(msg)) is not None:
            networks.setdefault(u.group(1))
        elif (n := _NO_DEVICE.search(msg)) is not None:
            no_device.setdefault(n.group(1))
        elif (n := _NET_IB.search(msg)) is not None:
            listed = n.group(2)
            if n.group(1).lower() == "socket":
                sockets.update(dict.fromkeys(_SOCKET_IF.findall(listed)))
            else:
                hcas.update(dict.fromkeys(f"{d}:{p}/{ll}" for d, p, ll in _HCA.findall(listed)))
        if (p := _PLUGIN.search(msg)) is not None:
            plugin = p.group(1)
        elif plugin is None and _NO_PLUGIN.search(msg):
            plugin = "none"
        if (g := _GDR.search(msg)) is not None:
            name = g.group(3) or f"HCA {g.group(2)}"
            (enabled if g.group(1) == "Enabled" else disabled).setdefault(name)
        if (c := _CHANNEL.search(msg)) is not None:
            dev = c.group("dev")
            channels.append(Channel(host=host, channel=int(c.group("ch")), src=c.group("src"), dst=c.group("dst"),
                                    direction=c.group("dir"), net=c.group("net"),
                                    dev=int(dev) if dev else None, gdr="GDRDMA" in c.group("rest"),
                                    line=msg[:200]))
    return NcclTransport(nccl_version=version, networks=list(networks), plugin=plugin, hcas=list(hcas),
                         socket_interfaces=list(sockets), no_device=list(no_device),
                         gdr_enabled=list(enabled), gdr_disabled=list(disabled), channels=channels,
                         hosts=list(hosts), info_lines=count)
