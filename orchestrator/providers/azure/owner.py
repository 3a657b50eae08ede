"""Who created an Azure cluster: evidence a tag writer cannot forge, and the owner tags shown.

A subscription is usually shared, and many people's clusters carry azbench's tags, so "not in my
store" never means "orphaned" (azure-notes.md §10). Every resource `up` creates carries the owner
tags `azbench-owner`, the object id of the principal that signed in (the `oid` claim of its ARM
access token, https://learn.microsoft.com/entra/identity-platform/access-token-claims-reference),
and `azbench-installation`, a random id made once per $AZBENCH_HOME. They say who the cluster
claims to belong to; anyone with Tag Contributor may write them, so they decide nothing.

Who created a cluster is decided by `creator` (docs/azure.md, "What makes a cluster yours"),
from evidence a same-name `up` that lost the race cannot overwrite: its one write is the group
PUT that ARM answered 200, which replaces the group's tags (owner and creator nonce included)
but reaches nothing inside the group. So the group's tags are a label, and the proof is:
1. the `createdBy` ARM stamps on the cluster's custom role definition when there is one (no
   tag writer can change it: RoleDefinition's read-only createdBy,
   https://learn.microsoft.com/rest/api/authorization/role-definitions/get);
2. else the tags of the cluster's child resources (VNet, NSG, public IP, NIC, VMs, scale sets),
   which only the `up` that got ARM's 201 Created writes, after that 201: the creator nonce this
   home computes for the signed-in principal (`creator_tag`: an HMAC keyed by
   $AZBENCH_HOME/installation-key, so no one else can make it for another group) on any of
   them makes it the caller's; otherwise the principal their owner tags name is its creator;
3. else, in a group with no child resource yet (an `up` stopped right after the group), the
   group's own creator nonce; else nobody known.
The same principal from another home is the same person: principals are compared, not
installations.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator import paths
from orchestrator.errors import NotOwnerError
from orchestrator.providers.azure_shared.clients import ArmClients
from orchestrator.providers.azure_shared.endpoints import arm_scope
from orchestrator.providers.azure_shared.tags import TAG_CLUSTER, TAG_CREATOR, TAG_INSTALL, TAG_OWNER
from orchestrator.providers.azure_shared.signin import signin_call

__all__ = ["Creator", "NotOwnerError", "Owner", "creator", "creator_tag", "foreign", "installation_id", "owner_of",
           "principal_of", "signed_in"]

INSTALLATION_FILE = "installation-id"
KEY_FILE = "installation-key"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Owner:
    """The signed-in principal and this home's installation id. Two owners are the same person
    when their principals are (a new home of the same principal is not "another owner")."""

    principal: str
    installation: str

    def tags(self) -> dict[str, str]:
        return {TAG_OWNER: self.principal, TAG_INSTALL: self.installation}

    def describe(self) -> str:
        return f"principal {self.principal}, installation {self.installation}"

    def same_person(self, other: Owner | None) -> bool:
        return other is not None and other.principal.lower() == self.principal.lower() and \
            self.principal != UNKNOWN


@dataclass(frozen=True)
class Creator:
    """Who created a cluster, and how that is known. `who` is "me", "other" or "unknown";
    `principal` the creator's object id where known."""

    who: str
    principal: str | None = None
    how: str = ""

    @property
    def mine(self) -> bool:
        return self.who == "me"

    def describe(self) -> str:
        """Why it is not the caller's, in one phrase (for "cluster 'x' is not yours: ...")."""
        if self.who == "other":
            return f"created by principal {self.principal} ({self.how})"
        return f"no evidence says who created it ({self.how})"


def installation_id() -> str:
    """This home's installation id, made (0600) on first use."""
    return _home_secret(INSTALLATION_FILE, lambda: str(uuid.uuid4()))


def installation_key() -> bytes:
    """This home's key for creator nonces, made (0600) on first use: 32 random bytes, hex."""
    return bytes.fromhex(_home_secret(KEY_FILE, lambda: secrets.token_hex(32)))


def creator_tag(me: Owner, subscription_id: str, rg: str, cluster: str) -> str:
    """The creator nonce `up` tags the group with: HMAC-SHA256 of the principal, subscription,
    group and cluster, keyed by this home's installation key (32 hex digits). A tag writer can
    read it but not make one for another group or principal; this home recomputes it to know
    its own."""
    text = f"{me.principal.lower()}|{subscription_id.lower()}|{rg.lower()}|{cluster}"
    return hmac.new(installation_key(), text.encode(), hashlib.sha256).hexdigest()[:32]


def creator(me: Owner, *, subscription_id: str, rg: str, cluster: str, tags: Mapping[str, str] | None,
            role_created_by: str | None, children: Sequence[Mapping[str, str]] | None = None,
            role_read: bool = True) -> Creator:
    """Who created group `rg` of `cluster` (see the module docstring): its custom role's
    createdBy when there is one (`role_created_by`, as ARM stamped it), else the tags of its
    child resources (`children`: each one's tags, from one listing of the group; None when not
    read), else, when it holds none, the group's creator tag when it is this home's nonce for
    `me`, else unknown. `role_read` False: the role was not looked for (messages say so rather
    than "it has no custom role")."""
    if role_created_by:
        mine = role_created_by.lower() == me.principal.lower()
        return Creator("me" if mine else "other", role_created_by,
                       "the createdBy ARM stamped on its custom role definition")
    nonce = creator_tag(me, subscription_id, rg, cluster)
    made = [c for c in (children or []) if c.get(TAG_CLUSTER) == cluster and (c.get(TAG_CREATOR) or c.get(TAG_OWNER))]
    if any(hmac.compare_digest(c.get(TAG_CREATOR, ""), nonce) for c in made):
        return Creator("me", me.principal, "its resources carry this home's creator nonce, which only the `up` "
                                           "that ARM answered 201 Created writes")
    others = sorted({c[TAG_OWNER] for c in made if c.get(TAG_OWNER) and c[TAG_OWNER].lower() != me.principal.lower()})
    if others:
        return Creator("other", others[0], "the owner tags of its resources, written by the `up` that ARM answered "
                                           "201 Created (a later group PUT does not reach them)")
    no_role = "it has no custom role" if role_read else "its custom role was not read"
    if made:  # the caller's principal, from another home (another nonce): not proof of this home
        return Creator("unknown", None, f"{no_role}, and its resources' creator tags are another home's "
                                        "(your principal's owner tags: from another home of yours?)")
    if not (children or []) and (tags or {}).get(TAG_CREATOR) and \
            hmac.compare_digest((tags or {})[TAG_CREATOR], nonce):
        return Creator("me", me.principal, "it holds no resource yet, and its creator tag is this home's nonce")
    claimed = owner_of(tags)
    said = f"; its group's owner tags name principal {claimed.principal}, which tags cannot prove" if claimed else ""
    held = "its resources carry no creator tag" if children else "it holds no resource of azbench's"
    return Creator("unknown", None, f"{no_role}, {held}, and its creator tag is not this home's{said}")


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
    """The caller: `principal` if given (tests), else the oid of the clients' ARM token (the
    credential caches it: the command's one sign-in)."""
    if principal is None:
        scopes = clients.credential_scopes or [arm_scope(clients.base_url)]
        with signin_call():
            token = clients.credential.get_token(*scopes).token
        principal = principal_of(token) or UNKNOWN
    return Owner(principal=principal, installation=installation_id())


def owner_of(tags: Mapping[str, str] | None) -> Owner | None:
    """The owner a resource's tags name, or None when they name none (not made by this azbench)."""
    tags = tags or {}
    if TAG_OWNER not in tags and TAG_INSTALL not in tags:
        return None
    return Owner(principal=tags.get(TAG_OWNER, UNKNOWN), installation=tags.get(TAG_INSTALL, UNKNOWN))


def foreign(tags: Mapping[str, str] | None, me: Owner) -> Owner | None:
    """The other person the owner tags name, or None when they name `me`'s principal (from any
    home). What the tags say, for display: `creator` decides."""
    theirs = owner_of(tags)
    if me.same_person(theirs):
        return None
    return theirs or Owner(principal=UNKNOWN, installation=UNKNOWN)


def _home_secret(name: str, make: Callable[[], str]) -> str:
    """The contents of $AZBENCH_HOME/<name>, made (0600, atomically) by `make()` on first use."""
    path = paths.ensure_home() / name
    if path.exists():
        text = path.read_text().strip()
        if text:
            return text
    value = make()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    os.replace(tmp, path)
    return value
