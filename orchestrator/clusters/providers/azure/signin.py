"""Sign-in failures in one line, and the Azure SDKs' loggers kept off the console.

azure-identity raises ClientAuthenticationError with a multi-line text (DefaultAzureCredential
lists every credential it tried) and logs the same at WARNING, which Python's last-resort handler
prints on stderr. `signin_call` turns the error into SignInError: "sign-in failed: <AADSTS code
and message>" (the first sentence of Entra ID's error_description,
https://learn.microsoft.com/entra/identity-platform/reference-error-codes), exit 3.
`quiet_sdk_loggers` sends the azure.* and msal loggers to $AZBENCH_HOME/logs/azure-debug.log at
DEBUG and nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterator

from orchestrator import paths
from orchestrator.clusters.providers.azure.errors import SignInError

SDK_LOGGERS = ("azure", "msal", "urllib3")
LOG_FILE = "azure-debug.log"
_AADSTS = re.compile(r"(AADSTS\d+):\s*(.+?\.)(?=\s|$)")
_handler: logging.Handler | None = None


def signin_message(text: str) -> str:
    """'AADSTS7000215: Invalid client secret provided.' from an azure-identity error text, else
    its first meaningful line."""
    match = _AADSTS.search(text)
    if match:
        return f"{match.group(1)}: {match.group(2)}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no credential could sign in"


def signin_error(exc: BaseException) -> SignInError:
    text = str(getattr(exc, "message", None) or exc)
    match = _AADSTS.search(text)
    hint = (None if match else
            "sign in with `az login`, or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET")
    log = log_path()
    detail = f"details in {log}" if log else None
    err = SignInError(signin_message(text), hint="; ".join(h for h in (hint, detail) if h) or None)
    err.code = match.group(1) if match else ""
    return err


@contextlib.contextmanager
def signin_call() -> Iterator[None]:
    """Turn azure-identity's ClientAuthenticationError raised inside into SignInError."""
    from azure.core.exceptions import ClientAuthenticationError
    try:
        yield
    except ClientAuthenticationError as exc:
        logging.getLogger("azure.identity").debug("sign-in failed", exc_info=exc)
        raise signin_error(exc) from exc


def log_path() -> str | None:
    handler = _handler
    return getattr(handler, "baseFilename", None) if handler is not None else None


def quiet_sdk_loggers() -> None:
    """azure.*, msal and urllib3 log to $AZBENCH_HOME/logs/azure-debug.log only (idempotent)."""
    global _handler
    if _handler is not None:
        return
    try:
        folder = paths.ensure_home() / "logs"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler: logging.Handler = logging.FileHandler(folder / LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    except OSError:
        handler = logging.NullHandler()
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    _handler = handler
