"""Sign-in failures in one line, and the Azure SDKs' loggers kept off the console.

azure-identity raises ClientAuthenticationError with a multi-line text (DefaultAzureCredential
lists every credential it tried) and logs the same at WARNING, which Python's last-resort handler
prints on stderr. `signin_call` turns the error into SignInError: "sign-in failed: <AADSTS code
and message>" (the first sentence of Entra ID's error_description,
https://learn.microsoft.com/entra/identity-platform/reference-error-codes), exit 3.
`quiet_sdk_loggers` sends the azure.* and msal loggers to $AZBENCH_HOME/logs/azure-debug.log and
nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

from orchestrator import paths
from orchestrator.providers.azure_shared.errors import SDK_LOG_FILE, signin_error

# Per-request HTTP logs and urllib3's connection chatter only under --debug/AZBENCH_DEBUG.
NOISY = ("azure.core.pipeline.policies.http_logging_policy", "urllib3")
_handler: logging.Handler | None = None


@contextlib.contextmanager
def signin_call() -> Iterator[None]:
    """Turn azure-identity's ClientAuthenticationError raised inside into SignInError."""
    from azure.core.exceptions import ClientAuthenticationError
    try:
        yield
    except ClientAuthenticationError as exc:
        logging.getLogger("azure.identity").debug("sign-in failed", exc_info=exc)
        raise signin_error(exc) from exc


def quiet_sdk_loggers() -> None:
    """azure.* and msal log to $AZBENCH_HOME/logs/azure-debug.log only, never the console
    (idempotent): INFO and up, everything under --debug (AZBENCH_DEBUG)."""
    global _handler
    if _handler is not None:
        return
    try:
        folder = paths.ensure_home() / "logs"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler: logging.Handler = logging.FileHandler(folder / SDK_LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    except OSError:
        handler = logging.NullHandler()
    debug = bool(os.environ.get("AZBENCH_DEBUG"))
    for name in ("azure", "msal", *NOISY):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if debug else logging.WARNING if name in NOISY else logging.INFO)
        logger.propagate = False
    _handler = handler
