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

A net plugin's name may hold spaces ("Using network AWS Libfabric", "via NET/AWS Libfabric/1/GDRDMA")
and a version ("IBext_v8"); RCCL prints the same lines and its own "RCCL version".

Bounded (issue 48): lines are fed one at a time (`LogParser.feed`), every pattern is matched at a
fixed place (a line's start, or where its literal first word was found), and a log keeps at most
MAX_CHANNELS channel lines (the rest are counted per transport). Pure: lines in, `NcclTransport` out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import Field

from orchestrator.fabric.nccltests import strip_prefix
from orchestrator.models import Frozen

MAX_CHANNELS = 4096  # channel lines kept (each rank prints its own); the rest only counted
MAX_NAMES = 256  # distinct hosts, HCAs, interfaces kept

_INFO = re.compile(r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+NCCL INFO\s+(?P<msg>.*)")
_USING_NET = re.compile(r"Using network\s+(.+)")
_NET_IB = re.compile(r"NET/(\w+)\s*:\s*Using\s+(.*)")
_HCA = re.compile(r"\[\d+\]([^\s:\[\]]+):(\d+)/(\w+)")
_SOCKET_IF = re.compile(r"\[\d+\]([^:\s\[\]]+):")
_NO_DEVICE = re.compile(r"NET/(\w+)\s*:\s*No device found")
_LOADED = re.compile(r"(?:NET/Plugin\s*:\s*)?(?:Loaded net plugin|P2P plugin|Using network plugin)\s+(.+)")
_NO_PLUGIN = re.compile(r"NET/Plugin\s*:\s*(?:No plugin found|Could not find)")
_GDR = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for (?:GPU \S+ / )?HCA (\d+)(?:\s+'([^']+)')?")
_CHANNEL = re.compile(r"(?:Channel|Ring)\s+(?P<ch>\d+)(?:/\d+)?\s*:\s*(?P<src>\S+)\s*->\s*(?P<dst>\S+)\s+"
                      r"\[(?P<dir>send|receive)\]\s+via\s+NET/(?P<rest>.*)")
_VERSION = re.compile(r"(?P<lib>NCCL|RCCL) version\s*:?\s*(?P<v>\S+)")
_PLUGIN_VERSION = re.compile(r"\s*\(v\d+\)\s*$")


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
    """What NCCL (or RCCL) said about its network in one log."""

    nccl_version: str | None = None
    rccl_version: str | None = Field(None, description="RCCL's version, when the library is RCCL")
    networks: list[str] = Field(default_factory=list, description="'Using network X' lines, in order of first sight")
    plugin: str | None = Field(None, description="the net plugin loaded; 'none' when NCCL said none was found")
    hcas: list[str] = Field(default_factory=list, description="HCA:port/link-layer as 'NET/IB : Using' lists them")
    socket_interfaces: list[str] = Field(default_factory=list)
    no_device: list[str] = Field(default_factory=list, description="nets that found no device ('NET/IB : No device found')")
    gdr_enabled: list[str] = Field(default_factory=list, description="HCAs with 'GPU Direct RDMA Enabled'")
    gdr_disabled: list[str] = Field(default_factory=list, description="HCAs with 'GPU Direct RDMA Disabled'")
    channels: list[Channel] = Field(default_factory=list)
    channels_dropped: dict[str, int] = Field(default_factory=dict,
                                             description="channel ends over MAX_CHANNELS, per transport")
    hosts: list[str] = Field(default_factory=list, description="hosts that printed NCCL INFO lines")
    info_lines: int = 0

    @property
    def by_transport(self) -> dict[str, int]:
        """Inter-node channel ends per transport ("NET/IB/GDRDMA": 32, "NET/Socket": 4)."""
        counts = Counter(c.transport for c in self.channels)
        counts.update(self.channels_dropped)
        return dict(counts)

    @property
    def channel_count(self) -> int:
        return len(self.channels) + sum(self.channels_dropped.values())

    @property
    def socket_channels(self) -> list[Channel]:
        return [c for c in self.channels if c.net.lower() == "socket"]

    @property
    def socket_count(self) -> int:
        return len(self.socket_channels) + sum(n for t, n in self.channels_dropped.items() if t == "NET/Socket")

    @property
    def gdr(self) -> bool | None:
        """GPUDirect RDMA in use: True when a channel says GDRDMA or NCCL enabled it for an HCA;
        False when NCCL disabled it and no channel uses it; None when the log does not say."""
        if any(c.gdr for c in self.channels) or self.gdr_enabled or any(
                t.endswith("/GDRDMA") for t in self.channels_dropped):
            return True
        if self.gdr_disabled or self.channels:
            return False
        return None


def looks_like_log(text: str) -> bool:
    return any(_INFO.match(strip_prefix(line)) for line in text.splitlines())


def parse_log(text: str | Iterable[str]) -> NcclTransport:
    """The NCCL INFO lines of `text` (a whole file or its lines), summarised."""
    parser = LogParser()
    for line in text.splitlines() if isinstance(text, str) else text:
        parser.feed(line)
    return parser.result()


def _add(names: dict[str, None], name: str) -> None:
    if len(names) < MAX_NAMES:
        names.setdefault(name)


class LogParser:
    """NCCL INFO lines, one at a time: `feed` each line, then `result()`."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.rccl: str | None = None
        self.networks: dict[str, None] = {}
        self.hcas: dict[str, None] = {}
        self.sockets: dict[str, None] = {}
        self.no_device: dict[str, None] = {}
        self.enabled: dict[str, None] = {}
        self.disabled: dict[str, None] = {}
        self.hosts: dict[str, None] = {}
        self.channels: list[Channel] = []
        self.dropped: Counter[str] = Counter()
        self.plugin: str | None = None
        self.count = 0

    def feed(self, raw: str) -> None:
        """Take one line of output (any launcher prefix); lines that are not NCCL's are ignored."""
        if "CCL" not in raw:
            return  # every line read here names NCCL or RCCL
        line = strip_prefix(raw)
        if self.version is None or self.rccl is None:
            self._version(line)
        if " NCCL INFO " not in line:
            return
        m = _INFO.match(line)
        if m is None:
            return
        self.count += 1
        host, msg = m.group("host"), m.group("msg").strip()
        _add(self.hosts, host)
        self._network(msg)
        self._plugin(msg)
        self._gdr(msg)
        if " via NET/" in msg and (c := _CHANNEL.match(msg)) is not None:
            self._channel(host, msg, c)

    def _version(self, line: str) -> None:
        """The first NCCL and the first RCCL version a line names (a HIP build is RCCL's)."""
        at = max(line.find("NCCL version"), line.find("RCCL version"))
        if at >= 0 and (v := _VERSION.match(line, at)) is not None:
            version = v.group("v")
            if v.group("lib") == "RCCL" or "+hip" in version or "-hip" in version:
                self.rccl = self.rccl or version
            if v.group("lib") == "NCCL":
                self.version = self.version or version

    def _network(self, msg: str) -> None:
        """The network in use, one with no device, or the HCAs / socket interfaces it lists."""
        if (u := _USING_NET.match(msg)) is not None:
            _add(self.networks, u.group(1).strip())
        elif (n := _NO_DEVICE.match(msg)) is not None:
            _add(self.no_device, n.group(1))
        elif (n := _NET_IB.match(msg)) is not None:
            listed = n.group(2).split(";")[0]
            if n.group(1).lower() == "socket":
                for name in _SOCKET_IF.findall(listed):
                    _add(self.sockets, name)
            else:
                for d, p, ll in _HCA.findall(listed):
                    _add(self.hcas, f"{d}:{p}/{ll}")

    def _plugin(self, msg: str) -> None:
        """The net plugin loaded (the last one named wins), or "none" when NCCL found none."""
        if (p := _LOADED.match(msg)) is not None:
            self.plugin = _PLUGIN_VERSION.sub("", p.group(1).strip()) or self.plugin
        elif self.plugin is None and _NO_PLUGIN.match(msg):
            self.plugin = "none"

    def _gdr(self, msg: str) -> None:
        """An HCA GPU Direct RDMA is enabled or disabled for."""
        at = msg.find("GPU Direct RDMA ")
        if at >= 0 and (g := _GDR.match(msg, at)) is not None:
            name = g.group(3) or f"HCA {g.group(2)}"
            _add(self.enabled if g.group(1) == "Enabled" else self.disabled, name)

    def _channel(self, host: str, msg: str, c: re.Match[str]) -> None:
        """One channel over the network; past MAX_CHANNELS it is only counted by transport."""
        # "NET/<name>[/<dev>][/GDRDMA]...": a plugin's name may hold spaces, never a slash
        parts = c.group("rest").split("/")
        net = parts[0].strip()
        dev = parts[1] if len(parts) > 1 and parts[1].isdigit() and len(parts[1]) < 6 else None
        gdr = any(part.strip().startswith("GDRDMA") for part in parts[1:])
        channel = Channel(host=host, channel=int(c.group("ch")[:9]), src=c.group("src")[:64],
                          dst=c.group("dst")[:64], direction=c.group("dir"), net=net[:64],
                          dev=int(dev) if dev else None, gdr=gdr, line=msg[:200])
        if len(self.channels) < MAX_CHANNELS:
            self.channels.append(channel)
        else:
            self.dropped[channel.transport] += 1

    def result(self) -> NcclTransport:
        return NcclTransport(nccl_version=self.version, rccl_version=self.rccl, networks=list(self.networks),
                             plugin=self.plugin, hcas=list(self.hcas), socket_interfaces=list(self.sockets),
                             no_device=list(self.no_device), gdr_enabled=list(self.enabled),
                             gdr_disabled=list(self.disabled), channels=self.channels,
                             channels_dropped=dict(self.dropped), hosts=list(self.hosts), info_lines=self.count)
