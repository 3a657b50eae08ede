"""A fake Azure instance metadata (IMDS) token endpoint on loopback, for one managed identity.

azure-identity's ManagedIdentityCredential asks IMDS for tokens at
`$AZURE_POD_IDENTITY_AUTHORITY_HOST/metadata/identity/oauth2/token` (169.254.169.254 without it),
exactly as on an Azure VM. This server answers like IMDS (400 without the `Metadata: true`
header) with a token it registers in the fake ARM as belonging to `principal_id`, so the fake
ARM holds that token to the scopes of the principal's role assignments. Stop it with `stop()`.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fake_arm import FakeArm


class FakeImds:
    def __init__(self, arm: FakeArm, principal_id: str) -> None:
        self.principal_id = principal_id
        self.token = f"mi-token-{principal_id}"
        self.requests: list[dict[str, list[str]]] = []
        arm.principals[self.token] = principal_id
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

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

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        self.requests.append(query)
        if parts.path != "/metadata/identity/oauth2/token":
            return 404, {"error": "not_found"}
        if headers.get("metadata", "").lower() != "true":
            return 400, {"error": "invalid_request", "error_description": "Required metadata header not specified"}
        resource = (query.get("resource") or [""])[0]
        expires = int(time.time()) + 3600
        return 200, {"access_token": self.token, "client_id": self.principal_id, "expires_in": "3600",
                     "expires_on": str(expires), "ext_expires_in": "3600", "not_before": str(expires - 3600),
                     "resource": resource, "token_type": "Bearer"}


def _handler(fake: FakeImds) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            status, payload = fake.answer(self.path, {k.lower(): v for k, v in self.headers.items()})
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return

    return Handler
