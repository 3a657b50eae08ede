"""A fake Azure Instance Metadata Service on loopback: one VM's Scheduled Events.

`GET /metadata/scheduledevents?api-version=...` (header `Metadata: true`, else 400) answers
{"DocumentIncarnation", "Events"}; `POST` with {"StartRequests": [{"EventId"}]} acknowledges
events: they leave the document, the ack time is recorded and `on_ack(event)` runs (a test's
eviction). `GET /metadata/instance/compute/name` answers the VM name. Stop it with `stop()`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Acked:
    event: dict[str, Any]
    at: float  # time.time()


@dataclass
class FakeImds:
    vm_name: str
    on_ack: Callable[[dict[str, Any]], None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    acked: list[Acked] = field(default_factory=list)
    polls: int = 0
    rejected: int = 0  # requests without the Metadata: true header
    incarnation: int = 1

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> FakeImds:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def preempt(self, notice_s: float = 30.0, resources: list[str] | None = None) -> dict[str, Any]:
        """Schedule a Preempt event for this VM, NotBefore `notice_s` from now (Azure: >= 30 s)."""
        event = {"EventId": f"E{next(self._ids):04d}-preempt", "EventType": "Preempt",
                 "ResourceType": "VirtualMachine",
                 "Resources": [self.vm_name] if resources is None else resources,
                 "EventStatus": "Scheduled", "NotBefore": formatdate(time.time() + notice_s, usegmt=True),
                 "Description": "Spot eviction", "EventSource": "Platform", "DurationInSeconds": -1}
        with self.lock:
            self.events.append(event)
            self.incarnation += 1
        return event

    def document(self) -> dict[str, Any]:
        with self.lock:
            self.polls += 1
            return {"DocumentIncarnation": self.incarnation, "Events": list(self.events)}

    def acknowledge(self, body: dict[str, Any]) -> int:
        ids = {r.get("EventId") for r in body.get("StartRequests", [])}
        with self.lock:
            hits = [e for e in self.events if e["EventId"] in ids]
            if not hits:
                return 400
            self.events = [e for e in self.events if e["EventId"] not in ids]
            self.incarnation += 1
            now = time.time()
            self.acked += [Acked(e, now) for e in hits]
        for event in hits:
            if self.on_ack:
                self.on_ack(event)
        return 200


def _handler(fake: FakeImds) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, payload: Any) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(payload, str)
                             else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _allowed(self) -> bool:
            if self.headers.get("Metadata") != "true":
                fake.rejected += 1
                self._reply(400, {"error": "Bad request. Required metadata header not specified"})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if not self._allowed():
                return
            if self.path.startswith("/metadata/scheduledevents?api-version="):
                self._reply(200, fake.document())
            elif self.path.startswith("/metadata/instance/compute/name"):
                self._reply(200, fake.vm_name)
            else:
                self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            if not self._allowed():
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.startswith("/metadata/scheduledevents?api-version="):
                self._reply(404, {"error": "not found"})
                return
            self._reply(fake.acknowledge(body), {})

        def log_message(self, *args: Any) -> None:
            return

    return Handler
