"""Who owns an Azure cluster: the signed-in principal's object id and this home's installation id.

A subscription is usually shared, and many people's clusters carry azbench's tags, so "not in my
store" never means "orphaned" (azure-notes.md §10). Every resource `up` creates carries two owner
tags: `azbench-owner`, the object id of the principal that signed in (the `oid` claim of its ARM
access token, https://learn.microsoft.com/entra/identity-platform/access-token-claims-reference),
and `azbench-installation`, a random id made once per $AZBENCH_HOME. A cluster is the caller's
when both match: `sweep` deletes only those unless --all-owners, `down` of another's needs
--force, and `up` never adopts another's cluster of the same name.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator import paths
from orchestrator.errors import NotOwnerError
from orchestrator.providers.azure_shared.clients import ArmClients
from orchestrator.providers.azure_shared.tags import TAG_INSTALL, TAG_OWNER

__all__ = ["NotOwnerError", "Owner", "foreign", "installation_id", "owner_of", "principal_of", "signed_in"]

INSTALLATION_FILE = "installation-id"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Owner:
    principal: str
    installation: str

    def tags(self) -> dict[str, str]:
        return {TAG_OWNER: self.principal, TAG_INSTALL: self.installation}

    def describe(self) -> str:
        return f"principal {self.principal}, installation {self.installation}"


def installation_id() -> str:
    """This home's installation id, made (0600) on first use."""
    path = paths.ensure_home() / INSTALLATION_FILE
    if path.exists():
        text = path.read_text().strip()
        if text:
            return text
    value = str(uuid.uuid4())
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    os.replace(tmp, path)
    return value


def principal_of(token: str) -> str | None:
    """The `oid` claim of a JWT access token (read, not verified: ARM verifies it), or None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    oid = claims.get("oid") if isinstance(claims, dict) else None
    return str(oid) if oid else None


def signed_in(clients: ArmClients, principal: str | None = None) -> Owner:
    """The caller: `principal` if given (tests), else the oid of the clients' ARM token."""
    if principal is None:
        from orchestrator.providers.azure_shared.signin import signin_call
        with signin_call():
            token = clients.arm_token()
        principal = principal_of(token) or UNKNOWN
    return Owner(principal=principal, installation=installation_id())


def owner_of(tags: Mapping[str, str] | None) -> Owner | None:
    """The owner a resource's tags name, or None when they name none (not made by this azbench)."""
    tags = tags or {}
    if TAG_OWNER not in tags and TAG_INSTALL not in tags:
        return None
    return Owner(principal=tags.get(TAG_OWNER, UNKNOWN), installation=tags.get(TAG_INSTALL, UNKNOWN))


def foreign(tags: Mapping[str, str] | None, me: Owner) -> Owner | None:
    """The other owner of a resource with `tags`, or None when it is `me`'s."""
    theirs = owner_of(tags)
    if theirs == me:
        return None
    return theirs or Owner(principal=UNKNOWN, installation=UNKNOWN)
