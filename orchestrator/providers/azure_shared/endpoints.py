"""Where Azure Resource Manager answers: the public cloud's endpoint, the check that a
sovereign cloud's endpoint a user gives is an https URL, and the token scope of an endpoint."""

from __future__ import annotations

import os

from orchestrator.errors import ConfigError

PUBLIC_ARM = "https://management.azure.com"
ENDPOINT_ENV = "AZURE_RESOURCE_MANAGER_ENDPOINT"


def check_arm_endpoint(value: str) -> str:
    """An Azure Resource Manager endpoint: an https URL with a host (sovereign clouds have their
    own, e.g. https://management.usgovcloudapi.net); ValueError saying what is wrong."""
    from urllib.parse import urlsplit
    shown = value if len(value) <= 60 else value[:57] + "..."
    try:
        url = urlsplit(value)
        url.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError as exc:
        raise ValueError(f"arm endpoint {shown!r} is not a URL: {exc}") from None
    if url.scheme != "https" or not url.hostname or any(c.isspace() for c in value) or url.username:
        raise ValueError(f"arm endpoint {shown!r} is not an https URL such as "
                         "https://management.azure.com")
    return value


def arm_endpoint(configured: str | None = None) -> str | None:
    """The ARM endpoint to use: `configured` (a spec's, checked where it was read), else
    $AZURE_RESOURCE_MANAGER_ENDPOINT checked here (ConfigError naming the variable), else None
    (the public cloud's), without a trailing slash."""
    if configured:
        return configured.rstrip("/")
    value = os.environ.get(ENDPOINT_ENV)
    if not value:
        return None
    try:
        check_arm_endpoint(value)
    except ValueError as exc:
        raise ConfigError(f"{ENDPOINT_ENV}: {exc}") from None
    return value.rstrip("/")


def arm_scope(base_url: str) -> str:
    """The token scope for ARM at `base_url` ('<endpoint>/.default'): what the clients ask
    the credential for, and what owner.signed_in reads the caller's object id from."""
    return f"{base_url.rstrip('/')}/.default"
