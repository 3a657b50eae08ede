"""Signing in to Azure: the production credential, sign-in failures in one line, and the Azure
SDKs' loggers kept off the console.

`default_credential` is DefaultAzureCredential (CLI login, managed identity, workload identity,
environment), with instance discovery off for an authority that is not one of Microsoft's.

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
import threading
from typing import TYPE_CHECKING, Iterator
from urllib.parse import urlsplit

from orchestrator import paths
from orchestrator.providers.azure_shared.errors import SDK_LOG_FILE, signin_error

if TYPE_CHECKING:
    from azure.identity import DefaultAzureCredential

PUBLIC_AUTHORITIES = frozenset({"login.microsoftonline.com", "login.microsoftonline.us",
                                "login.chinacloudapi.cn", "login.partner.microsoftonline.cn"})

# Per-request HTTP logs and urllib3's connection chatter only under --debug/AZBENCH_DEBUG.
NOISY = ("azure.core.pipeline.policies.http_logging_policy", "urllib3")
_handler: logging.Handler | None = None
_credentials: dict[tuple[tuple[str, str], ...], DefaultAzureCredential] = {}
_lock = threading.Lock()


def default_credential() -> DefaultAzureCredential:
    """DefaultAzureCredential (CLI login, managed identity, workload identity, environment),
    one per process and environment: every client of a command shares it, so the command signs
    in once (the credential caches its token until it expires).

    Instance discovery is turned off for an authority that is not one of Microsoft's public
    hosts: MSAL would otherwise validate it against login.microsoftonline.com first, which fails
    in sovereign or air-gapped clouds (azure-notes.md §3.5).
    """
    from azure.identity import DefaultAzureCredential
    # What DefaultAzureCredential reads from the environment decides which identity it signs in
    # as: another value (a test's second principal, in one process) is another credential.
    key = tuple(sorted((k, v) for k, v in os.environ.items()
                       if k.startswith(("AZURE_", "IDENTITY_", "MSI_")) or k in ("HOME", "USERPROFILE")))
    with _lock:
        if key not in _credentials:
            authority = os.environ.get("AZURE_AUTHORITY_HOST", "")
            host = urlsplit(authority if "//" in authority else f"https://{authority}").hostname or ""
            _credentials[key] = (DefaultAzureCredential(disable_instance_discovery=True)
                                 if authority and host not in PUBLIC_AUTHORITIES else DefaultAzureCredential())
        return _credentials[key]


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
