"""A fake Azure Instance Metadata Service (IMDS) on loopback, for one VM.

It answers the two IMDS APIs azbench's on-VM agents use, like IMDS (400 without the
`Metadata: true` header):
- Managed identity tokens: `GET /metadata/identity/oauth2/token` (azure-identity's
  ManagedIdentityCredential reaches it through `$AZURE_POD_IDENTITY_AUTHORITY_HOST`, see `env`).
  With `arm` and `principal_id`, the token is registered in the fake ARM as that principal's, so
  the fake ARM holds it to the scopes of the principal's role assignments (the expiry agent).
- Scheduled Events: `GET /metadata/scheduledevents?api-version=...` answers
  {"DocumentIncarnation", "Events"}; `POST` with {"StartRequests": [{"EventId"}]} acknowledges
  events: they leave the document, the ack time is recorded and `on_ack(event)` runs (a test's
  eviction). `GET /metadata/instance/compute/name` answers the VM name (the spot agent).
Stop it with `stop()`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from testsupport.fake_arm import FakeArm

_TOKEN_PATH = "/metadata/identity/oauth2/token"
_EVENTS_PATH = "/metadata/scheduledevents?api-version="


@dataclass
class Acked:
    event: dict[str, Any]
    at: float  # time.time()


class FakeImds:
    def __init__(self, vm_name: str = "head", *, arm: FakeArm | None = None,
                 principal_id: str | None = None,
                 on_ack: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.vm_name = vm_name
        self.on_ack = on_ack
        self.principal_id = principal_id
        self.token = f"mi-token-{principal_id}" if principal_id else None
        if arm is not None and self.token and principal_id:
            arm.principals[self.token] = principal_id
        self.requests: list[dict[str, list[str]]] = []  # token requests' query strings
        self.events: list[dict[str, Any]] = []
        self.acked: list[Acked] = []
        self.polls = 0
        self.rejected = 0  # requests without the Metadata: true header
        self.incarnation = 1
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.endpoint = self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def env(self) -> dict[str, str]:
        """What points ManagedIdentityCredential's IMDS client at this server."""
        return {"AZURE_POD_IDENTITY_AUTHORITY_HOST": self.base_url}

    def start(self) -> FakeImds:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- managed identity ------------------------------------------------------------------

    def token_answer(self, path: str) -> tuple[int, dict[str, Any]]:
        query = parse_qs(urlsplit(path).query)
        self.requests.append(query)
        if self.token is None:
            return 400, {"error": "invalid_request", "error_description": "Identity not found"}
        resource = (query.get("resource") or [""])[0]
        expires = int(time.time()) + 3600
        return 200, {"access_token": self.token, "client_id": self.principal_id, "expires_in": "3600",
                     "expires_on": str(expires), "ext_expires_in": "3600",
                     "not_before": str(expires - 3600), "resource": resource, "token_type": "Bearer"}

    # -- scheduled events ------------------------------------------------------------------

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
            if (self.headers.get("Metadata") or "").lower() != "true":
                fake.rejected += 1
                self._reply(400, {"error": "invalid_request",
                                  "error_description": "Required metadata header not specified"})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if not self._allowed():
                return
            if urlsplit(self.path).path == _TOKEN_PATH:
                self._reply(*fake.token_answer(self.path))
            elif self.path.startswith(_EVENTS_PATH):
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
            if not self.path.startswith(_EVENTS_PATH):
                self._reply(404, {"error": "not found"})
                return
            self._reply(fake.acknowledge(body), {})

        def log_message(self, *args: Any) -> None:
            return

    return Handler
