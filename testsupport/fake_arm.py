"""A stateful fake Azure Resource Manager on loopback, for driving the real azure-mgmt-* clients.

Implements what the Azure provider uses (azure-notes.md §5.2): resource groups; VNets, NSGs,
public IPs, NICs, VMs and VM scale sets with the Azure-AsyncOperation LRO protocol; tag-filtered
resource and resource-group lists; tags at scope (PATCH merge); resource SKUs, usages and VM
images; scale-set instances, which `evict()` deletes or deallocates as a spot eviction would, a
PATCH of the set's capacity adds back (new instance ids, as Azure gives), POST .../delete deletes
(delete instances: the capacity drops) and POST .../start starts again; role assignments and custom role definitions (`_role_definition`, each code cited), and
system-assigned VM identities whose tokens (testsupport/fake_imds.py) are held to the actions
their role assignments grant at their scopes (403 AuthorizationFailed, `_rbac`). A request for a
subscription the fake does not hold is 404 SubscriptionNotFound; a resource group being deleted
refuses writes with 409 ResourceGroupBeingDeleted.
Every request is logged (method, path, status). Failure switches (`Fault`) inject 429 with
Retry-After, 500, async AllocationFailed/ZonalAllocationFailed, 409 quota OperationNotAllowed and
409 SkuNotAvailable; `latency_s` delays every answer. Stop it with `stop()`.

Boot mode (`fabric=`, a testsupport.vm_emulator.Fabric): every VM ARM creates (the head, each scale-set
instance) becomes an emulated VM that boots the real cloud-init on its customData; public IPs
come from the fabric's range; deleting a VM, a scale set or the resource group stops its VMs;
operations answer Retry-After: 1, as ARM does, so the SDK's pollers need no test-only interval.
`tls_dir=` serves HTTPS with a CA made there, and an identity endpoint (OpenID configuration and
client-credential tokens under /<tenant>/: JWTs with an `oid`, and Entra's 401 AADSTS7000215 for a
wrong client secret), so the CLI's DefaultAzureCredential works unchanged. A GET of something
absent answers 404 with its resource provider's code (RoleAssignmentNotFound, ResourceGroupNotFound,
ResourceNotFound: `_missing`).
By hand: `python -m testsupport.fake_arm --boot-vms --state DIR` writes DIR/env.sh and serves until killed.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SUB = "00000000-0000-0000-0000-0000000000aa"
_LRO_TYPES = ("virtualnetworks", "networksecuritygroups", "publicipaddresses", "networkinterfaces",
              "virtualmachines", "virtualmachinescalesets")
_TAGS_AT_SCOPE = "/providers/microsoft.resources/tags/default"
# Built-in Contributor and Owner: the roles that let a managed identity act under their scope
# (every action but Microsoft.Authorization's writes, which the fake never lets an identity do).
DELETE_ROLES = ("b24988ac-6180-42a0-ab88-20f7382dd24c", "8e3af657-a8ff-443c-a75c-2fe8c4bcb635")
_ROLE_DEFS = "/providers/microsoft.authorization/roledefinitions/"
_ROLE_ASSIGNMENTS = "/providers/microsoft.authorization/roleassignments/"
# Azure supports up to 5000 custom roles in a directory
# (https://learn.microsoft.com/azure/role-based-access-control/troubleshoot-limits).
CUSTOM_ROLE_LIMIT = 5000
_TAG_FILTER = re.compile(r"tagName eq '([^']*)'(?: and tagValue eq '([^']*)')?")
QUOTA_MESSAGE = ("Operation could not be completed as it results in exceeding approved {family} Cores "
                 "quota. Additional details - Deployment Model: Resource Manager, Location: {loc}, "
                 "Current Limit: 0, Current Usage: 0, Additional Required: 96")


@dataclass
class Fault:
    """One failure switch. `kind`: throttle | error500 | quota | sku | locked | allocation | zonal_allocation.

    Matches requests whose method equals `method` and whose path contains `path_contains`; fires
    `times` times (then is spent). `zone` limits an allocation fault to PUTs for that zone.
    """

    kind: str
    method: str = "PUT"
    path_contains: str = ""
    times: int = 1
    zone: str | None = None
    retry_after_s: int = 1


@dataclass
class Delay:
    """Latency injection: requests whose method equals `method` and whose path contains
    `path_contains` are answered `seconds` later (the wait is outside the fake's lock, so other
    requests go on meanwhile, as ARM serves concurrent clients), `times` times (None: always)."""

    method: str
    path_contains: str
    seconds: float
    times: int | None = None
    # With `together`: the first `together` matching requests are held until all of them have
    # arrived (at most `seconds`), then answered in the order they came, 0.2 s apart: two
    # clients' writes that overlap inside one slow request, however their processes were paced.
    together: int = 0
    arrived: int = 0
    gate: threading.Condition = field(default_factory=threading.Condition)
    # With `release` (hold()): the matching requests wait until the test sets it (at most
    # `seconds`), then ARM answers them as they stand then: a slow client's write landing late.
    release: threading.Event | None = None


@dataclass
class _Op:
    key: str
    kind: str  # create | delete
    polls_left: int
    error: dict[str, Any] | None = None
    done: bool = False


@dataclass
class LogEntry:
    method: str
    path: str
    status: int
    query: dict[str, list[str]] = field(default_factory=dict)
    principal: str | None = None  # the `oid` of the request's bearer token (None: a sign-in)

    @property
    def sign_in(self) -> bool:
        """A request to the identity endpoint (OpenID configuration, token), not to ARM."""
        return self.path.endswith("/openid-configuration") or self.path.endswith("/oauth2/v2.0/token")

    @property
    def short(self) -> str:
        """'PUT 201 virtualMachineScaleSets/x', 'GET 200 op', ... for sequence assertions."""
        if "/operations/" in self.path:
            return f"{self.method} {self.status} op"
        tail = "/".join(self.path.rstrip("/").split("/")[-2:])
        return f"{self.method} {self.status} {tail}"


class FakeArm:
    """The server plus its state. `base_url` is http://127.0.0.1:<port>."""

    def __init__(self, *, polls_to_finish: int = 1, latency_s: float = 0.0, fabric: Any = None,
                 tls_dir: Path | None = None) -> None:
        self.fabric = fabric
        # Seconds the SDK's pollers wait between polls (as ARM's Retry-After); None: their own interval.
        self.retry_after: str | None = "1" if fabric is not None else None
        self.polls_to_finish = polls_to_finish
        self.latency_s = latency_s
        self.resources: dict[str, dict[str, Any]] = {}
        self.ops: dict[str, _Op] = {}
        self.faults: list[Fault] = []
        self.delays: list[Delay] = []
        self.log: list[LogEntry] = []
        self.skus: dict[str, list[dict[str, Any]]] = {}
        self.usages: dict[str, list[dict[str, Any]]] = {}
        self.images: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        # Requests whose x-test-client header equals this never see an operation finish: the
        # background pollers of a "killed" client must not complete what its rerun resumes.
        self.frozen_client: str | None = None
        # With frozen_client: only ops whose resource path contains this are frozen (None: all).
        self.frozen_match: str | None = None
        # The identity endpoint: the one client secret it accepts (env_for hands it out) and
        # the object id (`oid` claim) of each client's tokens.
        self.client_secret = "not-a-secret"
        self.client_oids: dict[str, str] = {}
        self.sticky: set[str] = set()  # resource names a delete "succeeds" on but leaves in place
        # Managed identities (testsupport/fake_imds.py): bearer token -> principal id. A request with one
        # of these tokens is allowed only under the scope of a role assignment for its principal.
        self.principals: dict[str, str] = {}
        # Scale-set instance ids by scale-set key, once evict() or a capacity PATCH touched the
        # set (before that: 0..capacity-1); deallocated ids by the same key.
        self.instances: dict[str, list[int]] = {}
        self.deallocated: dict[str, set[int]] = {}
        self._next_instance: dict[str, int] = {}
        self.impacts: dict[str, dict[str, Any]] = {}  # Guest Health Reporting, by impact name
        # The subscriptions ARM knows: any other is 404 SubscriptionNotFound.
        self.subscriptions: set[str] = {SUB}
        # Principals (token `oid`s) without Microsoft.Authorization/roleDefinitions/write (ARM
        # answers them 403 AuthorizationFailed), and the directory's custom-role limit.
        self.no_role_writes: set[str] = set()
        self.custom_role_limit = CUSTOM_ROLE_LIMIT
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._ips = itertools.count(10)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        scheme = "http"
        self.ca_file: Path | None = None
        if tls_dir is not None:
            self.ca_file, context = _tls_context(Path(tls_dir))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.base_url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._private_ips: dict[str, int] = {}
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def start(self) -> FakeArm:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.fabric is not None:
            self.fabric.close()

    # ------------------------------------------------------------ test helpers
    def add_fault(self, kind: str, **kw: Any) -> Fault:
        fault = Fault(kind=kind, **kw)
        with self.lock:
            self.faults.append(fault)
        return fault

    def add_latency(self, method: str, path_contains: str, seconds: float, times: int | None = None,
                    together: int = 0) -> Delay:
        """Slow the matching requests by `seconds` (see Delay): e.g. a resource group PUT, to open
        the window in which two `up`s of one name both find the group absent."""
        delay = Delay(method, path_contains, seconds, times, together)
        with self.lock:
            self.delays.append(delay)
        return delay

    def hold(self, method: str, path_contains: str, seconds: float = 300.0, times: int | None = 1) -> Delay:
        """Hold the matching requests until `delay.release.set()` (at most `seconds`): e.g. a
        slow `up`'s group PUT that reaches ARM only after a same-name `up` has finished; ARM
        then answers it as things stand (200: the group exists). `delay.arrived` counts those
        waiting."""
        delay = Delay(method, path_contains, seconds, times, release=threading.Event())
        with self.lock:
            self.delays.append(delay)
        return delay

    def mark(self) -> int:
        """A position in the request log: `since(mark)` is what came after it."""
        with self.lock:
            return len(self.log)

    def since(self, mark: int) -> list[LogEntry]:
        """Every request answered after `mark`, sign-ins to the identity endpoint included."""
        with self.lock:
            return list(self.log[mark:])

    def count(self, method: str | None = None, contains: str = "") -> int:
        return sum(1 for e in self.log if (method is None or e.method == method)
                   and contains.lower() in e.path.lower())

    def sequence(self, contains: str, *, ops: bool = True) -> list[str]:
        """Short log lines for requests on paths containing `contains` (plus op polls)."""
        return [e.short for e in self.log
                if contains.lower() in e.path.lower() or (ops and "/operations/" in e.path
                                                          and contains.lower() in _op_target(self, e.path))]

    def evict(self, scale_set: str, instance_ids: list[int], policy: str = "delete") -> None:
        """A spot eviction: `delete` removes the instances (capacity drops), `deallocate` stops them."""
        with self.lock:
            key = self._vmss_key(scale_set)
            ids = self._instance_ids(key)
            if policy == "delete":
                self.instances[key] = [i for i in ids if i not in instance_ids]
                self.resources[key]["sku"]["capacity"] = len(self.instances[key])
            else:
                self.deallocated.setdefault(key, set()).update(instance_ids)

    def _vmss_key(self, name: str) -> str:
        return next(k for k, r in self.resources.items()
                    if r["type"].lower().endswith("virtualmachinescalesets") and r["name"] == name)

    def _instance_ids(self, key: str) -> list[int]:
        if key not in self.instances:
            cap = self.resources[key].get("sku", {}).get("capacity", 0)
            self.instances[key] = list(range(cap))
            self._next_instance[key] = cap
        return self.instances[key]

    def _resize(self, key: str, capacity: int) -> None:
        ids = self._instance_ids(key)
        while len(ids) < capacity:  # Azure never reuses a deleted instance's id
            ids.append(self._next_instance[key])
            self._next_instance[key] += 1
        del ids[capacity:]

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        """Live resources whose type ends with `rtype` (case-insensitive), by name."""
        with self.lock:
            return {r["name"]: r for r in self.resources.values()
                    if r["type"].lower().endswith(rtype.lower())}

    # ------------------------------------------------------------ request handling
    def handle(self, method: str, raw_path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        if path.endswith("/v2.0/.well-known/openid-configuration") or path.endswith("/oauth2/v2.0/token"):
            status, doc = self._identity(path, body)
            return self._record(method, path, query, status, {}, doc)
        if not headers.get("authorization", "").startswith("Bearer "):
            return self._record(method, path, query, 401, {}, _err("AuthenticationFailed", "no bearer token"))
        if self.latency_s:
            time.sleep(self.latency_s)
        pause = self._delay(method, path)
        if pause:
            time.sleep(pause)
        token = headers["authorization"][len("Bearer "):]
        with self.lock:
            denied = self._unknown_subscription(path) or self._rbac(method, path, token)
            status, extra, payload = (denied or self._fault(method, path, body)
                                      or self._deleting_group(method, path)
                                      or (self._role_definition(method, path, body, token)
                                          if _ROLE_DEFS in path.lower() else None)
                                      or (self._role_definitions(path, query)
                                          if method == "GET" and path.lower().rstrip("/").endswith(
                                              _ROLE_DEFS.rstrip("/")) else None)
                                      or self._route(method, path, query, body, headers))
        return self._record(method, path, query, status, extra, payload, _claims(token).get("oid"))

    def _delay(self, method: str, path: str) -> float:
        """Seconds to hold this request (add_latency); a `together` delay waits here for the others."""
        found = None
        with self.lock:
            for delay in self.delays:
                if delay.method == method and delay.path_contains.lower() in path.lower() and \
                        (delay.times is None or delay.times > 0):
                    if delay.times is not None:
                        delay.times -= 1
                    found = delay
                    break
        if found is not None and found.release is not None:
            with found.gate:
                found.arrived += 1
                found.gate.notify_all()
            found.release.wait(found.seconds)
            return 0.0
        if found is None or not found.together:
            return found.seconds if found is not None else 0.0
        with found.gate:
            turn = found.arrived
            found.arrived += 1
            found.gate.notify_all()
            found.gate.wait_for(lambda: found.arrived >= found.together, timeout=found.seconds)
        return 0.2 * turn

    def _unknown_subscription(self, path: str) -> tuple[int, dict[str, str], Any] | None:
        """404 SubscriptionNotFound for a subscription ARM does not hold: "SubscriptionNotFound:
        A specified subscription for deployment can't be accessed. It could be the subscription ID
        is wrong, the user deploying the template doesn't have adequate permissions..."
        (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors);
        the message as ARM words it for a GUID it does not know."""
        m = re.match(r"/subscriptions/([^/]+)", path, re.I)
        if m is None or m.group(1).lower() in {s.lower() for s in self.subscriptions}:
            return None
        return 404, {}, _err("SubscriptionNotFound", f"The subscription '{m.group(1)}' could not be found.")

    def _deleting_group(self, method: str, path: str) -> tuple[int, dict[str, str], Any] | None:
        """A write into (or a second delete of) a resource group whose deletion is under way is
        refused with 409 ResourceGroupBeingDeleted ("Wait for deletion to complete.",
        https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors).
        Reads still answer, the group with provisioningState Deleting."""
        low = path.lower().rstrip("/")
        if method == "GET" or "/operations/" in low:
            return None
        m = re.match(r"(/subscriptions/[^/]+/resourcegroups/[^/]+)", low)
        group = self.resources.get(m.group(1)) if m else None
        if group is None or group.get("properties", {}).get("provisioningState") != "Deleting":
            return None
        name = group["name"]
        return 409, {}, _err("ResourceGroupBeingDeleted",
                             f"The resource group '{name}' is in deprovisioning state and cannot perform this "
                             "operation.")

    def _record(self, method: str, path: str, query: dict[str, list[str]], status: int,
                extra: dict[str, str], payload: Any, principal: str | None = None) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            self.log.append(LogEntry(method, path, status, query, principal))
        return status, extra, payload

    def _fault(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], Any] | None:
        for fault in self.faults:
            if fault.times <= 0 or fault.method != method or fault.path_contains.lower() not in path.lower():
                continue
            if fault.kind in ("allocation", "zonal_allocation"):
                zones = (json.loads(body or b"{}").get("zones") or [None])
                if fault.zone is not None and fault.zone not in zones:
                    continue
                fault.times -= 1
                code = "AllocationFailed" if fault.kind == "allocation" else "ZonalAllocationFailed"
                write = self._patch if method == "PATCH" else self._put
                return write(path, body, error=_err(code, "Allocation failed. We do not have "
                                                      "sufficient capacity for the requested VM size "
                                                      "in this region.")["error"])
            fault.times -= 1
            return _fault_response(fault, path)
        return None

    def _rbac(self, method: str, path: str, token: str) -> tuple[int, dict[str, str], Any] | None:
        """403 AuthorizationFailed for a managed identity whose role assignments do not grant the
        request's action at its scope. The action is the resource type's read, write or delete
        (`_action`); a role grants what its definition's `actions` list (a built-in Contributor
        or Owner: everything). Deleting a resource group also needs delete on every resource in it:
        "To delete a resource group, you need access to the delete action for the
        Microsoft.Resources/subscriptions/resourceGroups resource. You also need delete for all
        resources in the resource group." (https://learn.microsoft.com/azure/azure-resource-manager/
        management/delete-resource-group, "Required access and deletion failures"). The message is
        ARM's AuthorizationFailed wording (https://learn.microsoft.com/azure/role-based-access-control/
        troubleshooting)."""
        principal = self.principals.get(token)
        low = path.lower().rstrip("/")
        if principal is None or "/operations/" in low:
            return None
        needed = [(low, _action(method, path))]
        if method == "DELETE" and re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/[^/]+", low):
            needed += [(k, _action("DELETE", r.get("id") or k)) for k, r in self.resources.items()
                       if k.startswith(low + "/providers/") and _ROLE_ASSIGNMENTS not in k]
        for where, action in needed:
            if not self._granted(principal, where, action):
                return 403, {}, _err("AuthorizationFailed", (
                    f"The client '{principal}' with object id '{principal}' does not have authorization to "
                    f"perform action '{action}' over scope '{path}' or the scope is invalid."))
        return None

    def _granted(self, principal: str, target: str, action: str) -> bool:
        for key, res in self.resources.items():
            props = res.get("properties", {})
            if _ROLE_ASSIGNMENTS not in key or props.get("principalId") != principal:
                continue
            scope = key.split(_ROLE_ASSIGNMENTS)[0]
            if not (target == scope or target.startswith(scope + "/")):
                continue
            role = props.get("roleDefinitionId", "").lower()
            if role.endswith(DELETE_ROLES) and not action.lower().startswith("microsoft.authorization/"):
                return True
            definition = self.resources.get(_role_def_key(role))
            actions = [a for p in (definition or {}).get("properties", {}).get("permissions", [])
                       for a in p.get("actions", [])]
            if any(_matches(pattern, action) for pattern in actions):
                return True
        return False

    def _tags_at_scope(self, method: str, low: str, path: str, body: bytes) -> tuple[int, dict[str, str], Any]:
        target = self.resources.get(low[: -len(_TAGS_AT_SCOPE)])
        if target is None:
            return 404, {}, _not_found(low)
        if method in ("PATCH", "PUT"):
            doc = json.loads(body or b"{}")
            new = (doc.get("properties") or {}).get("tags") or {}
            op = doc.get("operation", "Replace" if method == "PUT" else "Merge")
            target["tags"] = {**(target.get("tags") or {}), **new} if op == "Merge" else dict(new)
        return 200, {}, {"id": path, "name": "default", "type": "Microsoft.Resources/tags",
                         "properties": {"tags": dict(target.get("tags") or {})}}

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes,
               headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        low = path.lower().rstrip("/")
        if low.endswith(_TAGS_AT_SCOPE):
            return self._tags_at_scope(method, low, path, body)
        if "/operations/" in low:
            op_id = low.rsplit("/", 1)[1]
            frozen = self.frozen_client is not None and headers.get("x-test-client") == self.frozen_client
            if frozen and self.frozen_match is not None:
                op = self.ops.get(op_id)
                frozen = op is not None and self.frozen_match in op.key
            return self._poll(op_id, frozen)
        if "/providers/microsoft.impact/workloadimpacts/" in low and method == "PUT":
            return self._workload_impact(path, body)
        if low.endswith("/providers/microsoft.compute/skus"):
            loc = _filter_location(query)
            return 200, {}, {"value": self.skus.get(loc, [])}
        if low.endswith("/usages"):
            return 200, {}, {"value": self.usages.get(low.split("/locations/")[1].split("/")[0], [])}
        if "/artifacttypes/vmimage/" in low:
            return self._images(low)
        if re.fullmatch(r"/subscriptions/[^/]+/resources", low):
            return 200, {}, {"value": self._tagged(query, groups=False)}
        if re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/[^/]+/resources", low):
            # Resources - List By Resource Group (https://learn.microsoft.com/rest/api/resources/
            # resources/list-by-resource-group): everything in the group, tagged or not.
            group = low.rsplit("/", 1)[0]
            if group not in self.resources:
                return 404, {}, _err("ResourceGroupNotFound",
                                     f"Resource group '{group.rsplit('/', 1)[1]}' could not be found.")
            return 200, {}, {"value": self._tagged(query, groups=False, within=group)}
        if re.fullmatch(r"/subscriptions/[^/]+/resourcegroups", low):
            return 200, {}, {"value": self._tagged(query, groups=True)}
        if low.endswith("/virtualmachinescalesets") or low.endswith("/virtualmachines") and "/virtualmachinescalesets/" in low:
            return self._list_children(low)
        if method == "PUT":
            return self._put(path, body)
        if method == "PATCH":
            return self._patch(path, body)
        if method == "POST" and low.endswith("/delete") and "/virtualmachinescalesets/" in low:
            return self._delete_instances(low.rsplit("/", 1)[0], body)
        if method == "POST" and low.endswith("/start") and "/virtualmachinescalesets/" in low:
            return self._power(low.rsplit("/", 1)[0], body, on=True)
        if method == "POST" and low.endswith("/deallocate") and "/virtualmachinescalesets/" in low:
            return self._power(low.rsplit("/", 1)[0], body, on=False)
        if method == "HEAD":  # Resource Groups - Check Existence: 204 there, 404 not
            # (https://learn.microsoft.com/rest/api/resources/resource-groups/check-existence)
            return (204 if low in self.resources else 404), {}, None
        if method == "GET":
            self._time_passes(low)
            res = self.resources.get(low)
            return (200, {}, res) if res else (404, {}, self._missing(low))
        if method == "DELETE":
            return self._delete(low)
        return 405, {}, _err("MethodNotAllowed", method)

    def _role_definition(self, method: str, path: str, body: bytes, token: str) -> tuple[int, dict[str, str], Any]:
        """Custom role definitions, as https://learn.microsoft.com/azure/role-based-access-control/
        custom-roles-rest documents them: PUT {scope}/providers/Microsoft.Authorization/
        roleDefinitions/{id} ({scope}: the first of assignableScopes) creates or updates; GET and
        DELETE at any scope name the one definition, whose id is the subscription's
        (/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{id}). Refusals:
        - the caller lacks Microsoft.Authorization/roleDefinitions/write (a Contributor, say; Owner
          and User Access Administrator have it, https://learn.microsoft.com/azure/role-based-access-
          control/custom-roles): 403 AuthorizationFailed (`no_role_writes`, by the token's oid);
        - a role name (unique in the directory) already taken by another id: 409
          RoleDefinitionWithSameNameExists, "A custom role with the same name already exists in this
          directory." (the code and 409 Conflict as Azure/azure-sdk-for-net's authorization tests
          assert them; the message as Kong's Azure docs quote it);
        - no assignableScopes: 400 MissingAssignableScopes (the same tests);
        - more than 5000 custom roles in the directory: RoleDefinitionLimitExceeded, "Role definition
          limit exceeded. No more role definitions can be created." (troubleshoot-limits; the page
          names no status: 400 here);
        - deleting one that role assignments still use: RoleDefinitionHasAssignments, "There are
          existing role assignments referencing role" (https://learn.microsoft.com/azure/
          role-based-access-control/troubleshooting; no status named: 409 here).
        A GET of an absent one is 404 RoleDefinitionDoesNotExist."""
        low = path.lower().rstrip("/")
        scope, _, def_id = low.rpartition(_ROLE_DEFS)
        key = _role_def_key(low)
        current = self.resources.get(key)
        if method == "GET":
            if current is None:
                return 404, {}, _err("RoleDefinitionDoesNotExist",
                                     f"The specified role definition with ID '{def_id}' does not exist.")
            return 200, {}, current
        if method == "DELETE":
            if current is None:
                return 204, {}, None
            if any(_role_def_key(r.get("properties", {}).get("roleDefinitionId", "")) == key
                   for k, r in self.resources.items() if _ROLE_ASSIGNMENTS in k):
                return 409, {}, _err("RoleDefinitionHasAssignments",
                                     "There are existing role assignments referencing role")
            return 200, {}, self.resources.pop(key)
        caller = _claims(token).get("oid", "")
        if caller in self.no_role_writes or token in self.principals:
            return 403, {}, _err("AuthorizationFailed", (
                f"The client '{caller}' with object id '{caller}' does not have authorization to perform "
                f"action 'Microsoft.Authorization/roleDefinitions/write' over scope '{scope}' or the scope "
                "is invalid."))
        doc = json.loads(body or b"{}")
        props = doc.get("properties") or {}
        if not props.get("assignableScopes"):
            return 400, {}, _err("MissingAssignableScopes", "The role definition has no assignable scopes.")
        name = props.get("roleName", "")
        if any(r["properties"].get("roleName", "").lower() == name.lower() for k, r in self.resources.items()
               if _ROLE_DEFS in k and k != key):  # names are unique in the directory
            return 409, {}, _err("RoleDefinitionWithSameNameExists",
                                 "A custom role with the same name already exists in this directory.")
        customs = sum(1 for k in self.resources if _ROLE_DEFS in k)
        if current is None and customs >= self.custom_role_limit:
            return 400, {}, _err("RoleDefinitionLimitExceeded",
                                 "Role definition limit exceeded. No more role definitions can be created.")
        sub = low.split("/")[2] if low.startswith("/subscriptions/") else SUB
        doc.update(id=f"/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{def_id}",
                   name=def_id, type="Microsoft.Authorization/roleDefinitions")
        props["type"] = "CustomRole"
        # Who made it and when, stamped by ARM (RoleDefinition's read-only createdBy, createdOn,
        # updatedBy, updatedOn: "Id of the user who created ..."; azure-mgmt-authorization
        # 2022-04-01 models): the caller's object id, kept from the first PUT.
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.0000000Z", time.gmtime())
        before = (current or {}).get("properties") or {}
        props.update(createdBy=before.get("createdBy", caller), createdOn=before.get("createdOn", stamp),
                     updatedBy=caller, updatedOn=stamp)
        self.resources[key] = doc
        return (200 if current is not None else 201), {}, doc

    def _role_definitions(self, path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        """Role Definitions - List: GET {scope}/providers/Microsoft.Authorization/roleDefinitions
        ("Get all role definitions that are applicable at scope and above"; $filter "Use
        atScopeAndBelow filter to search below the given scope as well", azure-mgmt-authorization
        2022-04-01 RoleDefinitionsOperations.list). At the tenant's root (no scope) with
        $filter=type eq 'CustomRole' it lists every custom role of the directory, as
        https://learn.microsoft.com/azure/role-based-access-control/custom-roles-rest shows ("List
        all custom role definitions in a tenant"). `roleName eq '...'` narrows by name. The fake
        holds custom roles only (built-in ones are referred to by id, never stored)."""
        low = path.lower().rstrip("/")
        scope = low[: -len(_ROLE_DEFS.rstrip("/"))].rstrip("/")
        text = (query.get("$filter") or [""])[0]
        below = "atscopeandbelow()" in text.lower()
        name = re.search(r"roleName eq '([^']*)'", text)
        out = []
        for key, doc in self.resources.items():
            if _ROLE_DEFS not in key:
                continue
            props = doc.get("properties") or {}
            scopes = [s.lower().rstrip("/") for s in props.get("assignableScopes") or []]
            applies = (not scope or any(scope == s or scope.startswith(s + "/") for s in scopes)
                       or (below and any(s.startswith(scope + "/") for s in scopes)))
            if applies and (name is None or props.get("roleName", "").lower() == name.group(1).lower()):
                out.append(doc)
        return 200, {}, {"value": out}

    def _workload_impact(self, path: str, body: bytes) -> tuple[int, dict[str, str], Any]:
        """Guest Health Reporting: PUT /subscriptions/{sub}/providers/Microsoft.Impact/workloadImpacts/
        {impactName} (https://learn.microsoft.com/en-us/azure/azure-impact-reporting/
        guest-health-impact-report, "REST client reporting"). As documented there: field names are
        case sensitive; startDateTime, impactCategory, impactDescription, impactedResourceId and
        additionalProperties.PhysicalHostName are required; an HPC category starts with
        "Resource.Hpc"; 200 means accepted; a failed validation is a 4xx with a message (the page
        names no code: 400 BadRequest here); reusing an impact name does not get 200 (the page
        names no code: 409 Conflict here). Accepted reports are kept in `impacts`."""
        name = path.rstrip("/").rsplit("/", 1)[1]
        if name in self.impacts:
            return 409, {}, _err("Conflict", f"workload impact '{name}' already exists")
        doc = json.loads(body or b"{}")
        props = doc.get("properties") or {}
        extra = props.get("additionalProperties") or {}
        missing = [k for k in ("startDateTime", "impactCategory", "impactDescription", "impactedResourceId")
                   if not props.get(k)] + ([] if extra.get("PhysicalHostName") else ["PhysicalHostName"])
        if missing:
            return 400, {}, _err("BadRequest", f"missing required fields: {', '.join(missing)}")
        if not str(props["impactCategory"]).startswith("Resource.Hpc"):
            return 400, {}, _err("BadRequest", f"impactCategory '{props['impactCategory']}' is not an HPC category")
        self.impacts[name] = doc
        return 200, {}, {"id": path, "name": name, "type": "Microsoft.Impact/workloadImpacts", **doc}

    def _missing(self, low: str) -> dict[str, Any]:
        """The 404 body of a GET on something absent. Each resource provider names its 404
        differently; the status is the contract (azure-notes.md §10):
        - a role assignment: RoleAssignmentNotFound, "The role assignment '<name>' is not found."
          (Microsoft.Authorization, as quoted in hashicorp/terraform-provider-azurerm issues 8584
          and 9379);
        - a resource group, or anything in a missing group: ResourceGroupNotFound, "Resource group
          '<name>' could not be found." (https://learn.microsoft.com/azure/azure-resource-manager/
          troubleshooting/error-not-found);
        - any other resource: ResourceNotFound (same page)."""
        marker = "/providers/microsoft.authorization/roleassignments/"
        if marker in low:
            return _err("RoleAssignmentNotFound", f"The role assignment '{low.rsplit('/', 1)[1]}' is not found.")
        rg = low.split("/providers/")[0]
        if "/resourcegroups/" in rg and rg not in self.resources:
            return _err("ResourceGroupNotFound", f"Resource group '{rg.rsplit('/', 1)[1]}' could not be found.")
        return _not_found(low)

    def _put(self, path: str, body: bytes, error: dict[str, Any] | None = None) -> tuple[int, dict[str, str], Any]:
        """Create or replace a resource. A resource group's PUT is answered 201 Created by the
        request that created it and 200 OK by one that found it there, and replaces its tags
        (https://learn.microsoft.com/rest/api/resources/resource-groups/create-or-update,
        Responses: "200 OK ... 201 Created"). An `If-None-Match: *` header is ignored, as ARM
        ignores it on groups: the Resource Groups API documents no such parameter and its
        ResourceGroup has no etag, and "the resource provider is responsible for storing and
        validating ETags - the frontdoor will never inspect these values"
        (https://github.com/Azure/azure-resource-manager-rpc, v1.0/Addendum.md, "ETags for
        Resources"); groups are served by that front door itself. A scale set whose
        singlePlacementGroup is true holds at most 100 VMs ("A scale set configured with a single
        placement group has a max capacity of 100 VMs", https://learn.microsoft.com/azure/
        virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups): more is refused
        400 (`_over_cap`)."""
        low = path.lower().rstrip("/")
        rg = low.split("/providers/")[0]
        is_group = "/providers/" not in low
        if not is_group and rg not in self.resources:
            name = rg.rsplit("/", 1)[1]
            return 404, {}, _err("ResourceGroupNotFound", f"Resource group '{name}' could not be found.")
        doc = json.loads(body or b"{}")
        refused = _over_cap(doc, self.resources.get(low))
        if refused is not None:
            return refused
        existed = low in self.resources
        doc.update(id=path, name=path.rstrip("/").rsplit("/", 1)[1], type=_rtype(path))
        props = doc.setdefault("properties", {})
        identity = doc.get("identity")
        if isinstance(identity, dict) and "SystemAssigned" in str(identity.get("type")):
            previous = (self.resources.get(low) or {}).get("identity") or {}
            identity["principalId"] = previous.get("principalId") or f"00000000-0000-4000-8000-{next(self._ids):012d}"
            identity["tenantId"] = "00000000-0000-0000-0000-0000000000bb"
        if is_group or not any(low.split("/providers/")[1].split("/")[1] == t for t in _LRO_TYPES):
            props["provisioningState"] = "Succeeded"
            self.resources[low] = doc
            return (200 if existed else 201), {}, doc
        props["provisioningState"] = "Updating" if existed else "Creating"
        self.resources[low] = doc
        return (200 if existed else 201), self._start_op(low, "create", error), doc

    def _patch(self, path: str, body: bytes, error: dict[str, Any] | None = None) -> tuple[int, dict[str, str], Any]:
        """Update a live resource in place (a scale set's sku.capacity resizes its instances)."""
        low = path.lower().rstrip("/")
        res = self.resources.get(low)
        if res is None:
            return 404, {}, _not_found(low)
        doc = json.loads(body or b"{}")
        refused = _over_cap(doc, res)
        if refused is not None:
            return refused
        if "sku" in doc:
            res.setdefault("sku", {}).update(doc["sku"])
            if error is None and "capacity" in doc["sku"]:
                self._resize(low, int(doc["sku"]["capacity"]))
        res["tags"] = doc.get("tags", res.get("tags"))
        res["properties"]["provisioningState"] = "Updating"
        return 200, self._start_op(low, "create", error), res

    def _delete(self, low: str) -> tuple[int, dict[str, str], Any]:
        if low not in self.resources:
            if "/providers/" not in low:
                return 404, {}, _err("ResourceGroupNotFound", "Resource group could not be found.")
            return 204, {}, None
        if "/providers/microsoft.authorization/" in low:  # role assignments go at once
            return 200, {}, self.resources.pop(low)
        self.resources[low]["properties"]["provisioningState"] = "Deleting"
        return 202, self._start_op(low, "delete", None), None

    def _time_passes(self, low: str) -> None:
        """A read of something being deleted counts as a poll of its delete: ARM finishes a
        deletion whoever polls it, and a client that did not start it (a second `down`) waits
        by reading the resource until it answers 404 (as ARM does after a delete,
        https://learn.microsoft.com/azure/azure-resource-manager/management/delete-resource-group,
        "After deletion")."""
        res = self.resources.get(low)
        if res is None or res.get("properties", {}).get("provisioningState") != "Deleting":
            return
        for op in list(self.ops.values()):
            if op.key == low and op.kind == "delete" and not op.done:
                self._poll_op(op)

    def _delete_instances(self, key: str, body: bytes) -> tuple[int, dict[str, str], Any]:
        """VirtualMachineScaleSets - Delete Instances: POST .../virtualMachineScaleSets/{name}/delete
        with {"instanceIds": [...]}, answered 200 or 202 with an async operation
        (https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-sets/delete-instances;
        azure-mgmt-compute 39's build_virtual_machine_scale_sets_delete_instances_request and
        _delete_instances_initial, which accept [200, 202]). The instances go and the set's
        sku.capacity drops by as many (the page's "Deletes virtual machines in a VM scale set";
        a later capacity increase creates instances with new ids: `_resize`). An id the set does
        not hold is refused 404 NotFound, as ARM answers for an instance that is gone. Here the
        VMs stop at the request, not when the operation finishes."""
        vmss = self.resources.get(key)
        if vmss is None:
            return 404, {}, _not_found(key)
        wanted = [int(i) for i in (json.loads(body or b"{}").get("instanceIds") or [])]
        ids = self._instance_ids(key)
        missing = [i for i in wanted if i not in ids]
        if missing:
            return 404, {}, _err("NotFound", f"The entity was not found: instance ids {missing} of {vmss['name']}.")
        self.instances[key] = [i for i in ids if i not in wanted]
        vmss["sku"]["capacity"] = len(self.instances[key])
        self.deallocated.get(key, set()).difference_update(wanted)
        if self.fabric is not None:
            for i in wanted:
                self.fabric.delete(f"{vmss['name']}_{i}")
        return 202, self._start_op(key, "action", None), None

    def _power(self, key: str, body: bytes, *, on: bool) -> tuple[int, dict[str, str], Any]:
        """VirtualMachineScaleSets - Start / Deallocate: POST .../start or .../deallocate with
        optional {"instanceIds": [...]} (none: every instance), answered 202 with an async
        operation (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/start,
        .../deallocate: "Deallocates specific virtual machines in a VM scale set. Shuts down the
        virtual machines and releases the compute resources. You are not billed for the compute
        resources that this virtual machine scale set deallocates."). A deallocated instance keeps
        its instance id (and the set's capacity); starting it gives the same id back. In boot mode
        a deallocated VM stops, and a started one boots again (a fresh private address, as Azure
        may give)."""
        vmss = self.resources.get(key)
        if vmss is None:
            return 404, {}, _not_found(key)
        ids = self._instance_ids(key)
        wanted = [int(i) for i in (json.loads(body or b"{}").get("instanceIds") or ids)]
        missing = [i for i in wanted if i not in ids]
        if missing:
            return 404, {}, _err("NotFound", f"The entity was not found: instance ids {missing} of {vmss['name']}.")
        off = self.deallocated.setdefault(key, set())
        if on:
            off.difference_update(wanted)
            if not off:
                self.deallocated.pop(key, None)
            if self.fabric is not None and not self.ops_pending(key):
                for spec in self._instance_specs(key, vmss):
                    self.fabric.boot(spec)
        else:
            off.update(wanted)
            if self.fabric is not None:
                for i in wanted:
                    self.fabric.delete(f"{vmss['name']}_{i}")
        return 202, self._start_op(key, "action", None), None

    def ops_pending(self, key: str) -> bool:
        """Whether a create or update of `key` has not finished (its VMs boot when it does)."""
        return any(op.key == key and op.kind == "create" and not op.done for op in self.ops.values())

    def _start_op(self, key: str, kind: str, error: dict[str, Any] | None) -> dict[str, str]:
        op_id = f"op-{next(self._ids)}"
        self.ops[op_id] = _Op(key=key, kind=kind, polls_left=self.polls_to_finish, error=error)
        url = f"{self.base_url}/subscriptions/{SUB}/providers/Microsoft.Fake/locations/x/operations/{op_id}?api-version=1"
        headers = {"Azure-AsyncOperation": url}
        if self.retry_after is not None:
            headers["Retry-After"] = self.retry_after
        if kind == "delete":
            headers["Location"] = url
        return headers

    def _poll(self, op_id: str, frozen: bool) -> tuple[int, dict[str, str], Any]:
        op = self.ops.get(op_id)
        if op is None:
            return 404, {}, _err("NotFound", op_id)
        wait = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
        if frozen:
            return 200, wait, {"status": "InProgress"}
        if not self._poll_op(op):
            return 200, wait, {"status": "InProgress"}
        if op.error:
            return 200, {}, {"status": "Failed", "error": op.error}
        return 200, {}, {"status": "Succeeded"}

    def _poll_op(self, op: _Op) -> bool:
        """One poll of `op`: True once it has ended (finished on this poll or before)."""
        if op.polls_left > 0:
            op.polls_left -= 1
            return False
        if not op.done:
            op.done = True
            self._finish(op)
        return True

    def _finish(self, op: _Op) -> None:
        res = self.resources.get(op.key)
        if op.kind == "action":
            return
        if op.kind == "delete":
            for key in [k for k in self.resources if k == op.key or k.startswith(op.key + "/")]:
                if self.resources[key]["name"].lower() not in self.sticky:
                    self._stop_vms(key)
                    del self.resources[key]
                    for table in (self.instances, self.deallocated, self._next_instance):
                        table.pop(key, None)  # a scale set made again under this name starts at id 0
            return
        if res is None:
            return
        props = res["properties"]
        props["provisioningState"] = "Failed" if op.error else "Succeeded"
        kind = op.key.split("/")[-2]
        if kind == "publicipaddresses":
            props["ipAddress"] = self.fabric.public_ip() if self.fabric else f"20.0.0.{next(self._ips)}"
        if self.fabric is not None and not op.error and kind in ("virtualmachines", "virtualmachinescalesets"):
            for spec in (self._head_spec(res) if kind == "virtualmachines" else self._instance_specs(op.key, res)):
                self.fabric.boot(spec)

    # ------------------------------------------------------------ boot mode
    def _stop_vms(self, key: str) -> None:
        if self.fabric is None:
            return
        res = self.resources[key]
        kind = key.split("/")[-2] if "/providers/" in key else ""
        if kind == "virtualmachines":
            self.fabric.delete(res["name"])
        elif kind == "virtualmachinescalesets":
            for i in self.instances.get(key, range(res.get("sku", {}).get("capacity", 0))):
                self.fabric.delete(f"{res['name']}_{i}")

    def _subnet(self, subnet_id: str) -> Any:
        import ipaddress
        vnet_key, _, name = subnet_id.lower().partition("/subnets/")
        vnet = self.resources[vnet_key]
        for sub in vnet["properties"].get("subnets", []):
            if sub["name"].lower() == name:
                return ipaddress.ip_network(sub["properties"]["addressPrefix"])
        raise KeyError(subnet_id)

    def _vcpus(self, size: str) -> int:
        for rows in self.skus.values():
            for row in rows:
                if row["name"] == size:
                    return int(next(c["value"] for c in row["capabilities"] if c["name"] == "vCPUs"))
        return 2

    def _head_spec(self, vm: dict[str, Any]) -> list[Any]:
        from testsupport.vm_emulator import VmSpec
        props = vm["properties"]
        nic = self.resources[props["networkProfile"]["networkInterfaces"][0]["id"].lower()]
        ipc = nic["properties"]["ipConfigurations"][0]["properties"]
        net = self._subnet(ipc["subnet"]["id"])
        pip_ref = ipc.get("publicIPAddress")
        pip = self.resources.get(pip_ref["id"].lower()) if pip_ref else None
        os_profile = props["osProfile"]
        size = props["hardwareProfile"]["vmSize"]
        return [VmSpec(name=vm["name"], hostname=os_profile["computerName"], private_ip=ipc["privateIPAddress"],
                       prefix_len=net.prefixlen, public_ip=pip["properties"].get("ipAddress") if pip else None,
                       custom_data=os_profile.get("customData", ""), admin_user=os_profile["adminUsername"],
                       ssh_keys=_keys(os_profile), size=size, vcpus=self._vcpus(size))]

    def _instance_specs(self, key: str, vmss: dict[str, Any]) -> list[Any]:
        """The instances of the set not yet booted: by instance id, so a capacity PATCH after a
        delete boots only the new ids (the ones `_resize` handed out), each with a new address."""
        from testsupport.vm_emulator import VmSpec
        profile = vmss["properties"]["virtualMachineProfile"]
        os_profile = profile["osProfile"]
        nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
        net = self._subnet(nic["ipConfigurations"][0]["properties"]["subnet"]["id"])
        size = vmss["sku"]["name"]
        return [VmSpec(name=f"{vmss['name']}_{i}", hostname=_host(vmss, i), private_ip=self._dhcp(net),
                       prefix_len=net.prefixlen, public_ip=None, custom_data=os_profile.get("customData", ""),
                       admin_user=os_profile["adminUsername"], ssh_keys=_keys(os_profile), size=size,
                       vcpus=self._vcpus(size))
                for i in self._instance_ids(key) if f"{vmss['name']}_{i}" not in self.fabric.vms
                and i not in self.deallocated.get(key, set())]

    def _dhcp(self, net: Any) -> str:
        """The next dynamic address of the subnet: Azure keeps .0-.3; static ones are skipped."""
        static = {r["properties"]["ipConfigurations"][0]["properties"].get("privateIPAddress")
                  for r in self.of_type("networkInterfaces").values()}
        n = self._private_ips.get(str(net), 4)
        while str(net.network_address + n) in static:
            n += 1
        self._private_ips[str(net)] = n + 1
        return str(net.network_address + n)

    def _identity(self, path: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
        """Microsoft identity platform, enough for MSAL's client-credential flow.

        A token request with a client secret other than `client_secret` is refused as Entra ID
        refuses it: HTTP 401, `error: invalid_client`, AADSTS7000215 in error_description and
        error_codes (https://learn.microsoft.com/entra/identity-platform/reference-error-codes:
        "AADSTS7000215 InvalidClientSecret - Invalid client secret provided"; the error response
        shape is that of https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow#error-response,
        and RFC 6749 §5.2 answers invalid_client with 401). A granted access token is a JWT whose
        `oid` claim is the client's object id, as Entra's access tokens carry it
        (https://learn.microsoft.com/entra/identity-platform/access-token-claims-reference, `oid`:
        the immutable identifier of the user or service principal): `client_oids` by client id,
        else a stable UUID made from the client id.
        """
        tenant = path.strip("/").split("/")[0]
        base = f"{self.base_url}/{tenant}"
        if path.endswith("openid-configuration"):
            return 200, {"token_endpoint": f"{base}/oauth2/v2.0/token",
                         "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                         "issuer": f"{base}/v2.0", "jwks_uri": f"{base}/discovery/v2.0/keys",
                         "response_types_supported": ["code"], "subject_types_supported": ["pairwise"],
                         "id_token_signing_alg_values_supported": ["RS256"], "tenant_region_scope": None,
                         "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode"}
        form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        client = form.get("client_id", "")
        if "client_secret" in form and form["client_secret"] != self.client_secret:
            return 401, {"error": "invalid_client", "error_codes": [7000215],
                         "error_description": (
                             "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in "
                             "the request is the client secret value, not the client secret ID, for a secret "
                             f"added to app '{client}'. Trace ID: 00000000-0000-0000-0000-000000000001 "
                             "Correlation ID: 00000000-0000-0000-0000-000000000002 "
                             "Timestamp: 2026-01-01 00:00:00Z"),
                         "timestamp": "2026-01-01 00:00:00Z",
                         "trace_id": "00000000-0000-0000-0000-000000000001",
                         "correlation_id": "00000000-0000-0000-0000-000000000002",
                         "error_uri": f"{self.base_url}/error?code=7000215"}
        oid = self.client_oids.get(client) or str(uuid.uuid5(uuid.NAMESPACE_URL, f"azbench-fake-client:{client}"))
        return 200, {"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600,
                     "access_token": unsigned_jwt({"oid": oid, "tid": tenant, "appid": client})}

    def _tagged(self, query: dict[str, list[str]], *, groups: bool, within: str = "") -> list[dict[str, Any]]:
        """Resource groups, or resources (of the subscription, or of group `within`), matching
        the `$filter` tag condition if any. Resources come as the generic list returns them
        (id, name, type, location, tags, sku, identity: GenericResourceExpanded; no properties),
        with provisioningState only when `$expand` asks for it ("$expand: comma-separated list
        of additional properties to be included in the response. Valid values include
        createdTime, changedTime and provisioningState", https://learn.microsoft.com/rest/api/
        resources/resources/list). Extension resources (role assignments and definitions) are
        not listed, as ARM's resource list leaves them out."""
        match = _TAG_FILTER.search((query.get("$filter") or [""])[0])
        expand = (query.get("$expand") or [""])[0].lower()
        out = []
        for key, res in self.resources.items():
            if ("/providers/" in key) == groups or "/providers/microsoft.authorization/" in key:
                continue
            if within and not key.startswith(within + "/providers/"):
                continue
            tags = res.get("tags") or {}
            if match and (match.group(1) not in tags or (match.group(2) is not None
                                                        and tags[match.group(1)] != match.group(2))):
                continue
            if groups:
                out.append(res)
                continue
            view = {k: v for k, v in res.items() if k in ("id", "name", "type", "location", "tags", "sku",
                                                           "identity", "kind", "zones")}
            if "provisioningstate" in expand:
                view["provisioningState"] = (res.get("properties") or {}).get("provisioningState")
            out.append(view)
        return out

    def _list_children(self, low: str) -> tuple[int, dict[str, str], Any]:
        if low.endswith("/virtualmachinescalesets"):
            return 200, {}, {"value": [r for k, r in self.resources.items()
                                       if k.startswith(low + "/") and k.count("/") == low.count("/") + 1]}
        vmss = self.resources.get(low.rsplit("/", 1)[0])
        if vmss is None:
            return 404, {}, _not_found(low)
        key = low.rsplit("/", 1)[0]
        ids = self.instances.get(key, range(vmss.get("sku", {}).get("capacity", 0)))
        state = vmss["properties"]["provisioningState"]
        off = self.deallocated.get(key, set())
        return 200, {}, {"value": [{"id": f"{vmss['id']}/virtualMachines/{i}", "name": f"{vmss['name']}_{i}",
                                    "instanceId": str(i), "location": vmss.get("location"),
                                    "properties": {"provisioningState": state,
                                                   "osProfile": {"computerName": _host(vmss, i)},
                                                   "instanceView": {"statuses": [{"code": "PowerState/" + (
                                                       "deallocated" if i in off else "running")}]}}}
                                   for i in ids]}

    def _images(self, low: str) -> tuple[int, dict[str, str], Any]:
        m = re.search(r"/locations/([^/]+)/publishers/([^/]+)/artifacttypes/vmimage/offers/([^/]+)/skus"
                      r"(?:/([^/]+)/versions(?:/([^/]+))?)?$", low)
        if not m:
            return 404, {}, _not_found(low)
        loc, pub, offer, sku, version = m.groups()
        rows = {k: v for k, v in self.images.items() if k[:2] == (pub, offer) and (loc in v.get("locations", [loc]))}
        if sku is None:
            return 200, {}, [{"name": s, "location": loc, "id": f"{low}/{s}"} for s in sorted({k[2] for k in rows})]
        versions = sorted(k[3] for k in rows if k[2] == sku)
        if version is None:
            return 200, {}, [{"name": v, "location": loc, "id": f"{low}/{v}"} for v in versions]
        row = self.images.get((pub, offer, sku, version))
        if row is None:
            return 404, {}, _not_found(low)
        return 200, {}, {"name": version, "location": loc, "id": low,
                         "properties": {"architecture": row["architecture"],
                                        "hyperVGeneration": row.get("hyperVGeneration", "V2")}}


def default_catalogue(fake: FakeArm, location: str = "eastus", *, free_vcpus: int = 100_000) -> None:
    """Offer the GPU and CPU sizes, generous quota, the Ubuntu-HPC and Ubuntu images in `location`."""
    from orchestrator.hardware.catalog import cpu_azure_skus, gpu_skus
    rows = gpu_skus() + cpu_azure_skus()
    fake.skus[location] = [_sku_row(s.name, location, s.vcpus, s.quota_family, s.cpu_arch) for s in rows]
    families = {s.quota_family for s in rows}
    fake.usages[location] = [_usage(f, 0, free_vcpus) for f in sorted(families)] + [
        _usage("cores", 0, free_vcpus * 4), _usage("lowPriorityCores", 0, free_vcpus)]
    fake.images[("microsoft-dsvm", "ubuntu-hpc", "2204", "22.04.2025010101")] = {"architecture": "x64"}
    fake.images[("microsoft-dsvm", "ubuntu-hpc", "2404", "24.04.2025010101")] = {"architecture": "x64"}
    fake.images[("microsoft-dsvm", "ubuntu-hpc", "2404-arm64", "24.04.2025010101")] = {"architecture": "Arm64"}
    fake.images[("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22.04.202501010")] = {
        "architecture": "x64"}


def restrict(fake: FakeArm, sku: str, location: str = "eastus", *, zones: list[str] | None = None,
             reason: str = "NotAvailableForSubscription") -> None:
    """Restrict `sku` for this subscription: in `zones` of `location`, or (zones None) the whole
    location. The row's shape is the Resource SKUs API's
    (https://learn.microsoft.com/en-us/rest/api/compute/resource-skus/list, ResourceSkuRestrictions):
    a Location restriction lists the location in `values` and `restrictionInfo.locations`; a
    Zone restriction lists the location and the zones in `restrictionInfo`, while `locationInfo`
    still names every zone of the size (what `az vm list-skus` shows as "Restrictions")."""
    row = next(r for r in fake.skus[location] if r["name"] == sku)
    entry: dict[str, Any] = {"type": "Location" if zones is None else "Zone", "values": [location],
                             "restrictionInfo": {"locations": [location], **({"zones": zones} if zones else {})},
                             "reasonCode": reason}
    row.setdefault("restrictions", []).append(entry)


def arm_writes(fake: FakeArm) -> int:
    """Requests that change ARM state (PUT, PATCH, POST, DELETE under /subscriptions/), as the
    fake's log holds them; sign-in POSTs to the identity endpoint are not ARM writes."""
    return sum(1 for e in fake.log if e.method in ("PUT", "PATCH", "POST", "DELETE")
               and e.path.lower().startswith("/subscriptions/"))


def _sku_row(name: str, loc: str, vcpus: int, family: str, arch: str) -> dict[str, Any]:
    return {"resourceType": "virtualMachines", "name": name, "tier": "Standard", "size": name.split("_", 1)[1],
            "family": family, "locations": [loc], "locationInfo": [{"location": loc, "zones": ["1", "2", "3"]}],
            "capabilities": [{"name": "vCPUs", "value": str(vcpus)}, {"name": "HyperVGenerations", "value": "V2"},
                             {"name": "CpuArchitectureType", "value": "Arm64" if arch == "arm64" else "x64"}],
            "restrictions": []}


def _usage(family: str, used: int, limit: int) -> dict[str, Any]:
    return {"unit": "Count", "currentValue": used, "limit": limit,
            "name": {"value": family, "localizedValue": family}}


def _host(vmss: dict[str, Any], i: int) -> str:
    prefix: str = vmss["properties"].get("virtualMachineProfile", {}).get("osProfile", {}).get("computerNamePrefix", "")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(6):
        i, r = divmod(i, 36)
        out = digits[r] + out
    return prefix + out


SINGLE_PLACEMENT_GROUP_MAX = 100


def _over_cap(doc: dict[str, Any], current: dict[str, Any] | None) -> tuple[int, dict[str, str], Any] | None:
    """400 for a scale set asked to hold more than 100 VMs while it is (or stays) a single
    placement group (`_put` cites the limit). The documentation names no error code for it:
    InvalidParameter here, ARM's code for a request value it refuses."""
    capacity = (doc.get("sku") or {}).get("capacity")
    if capacity is None or int(capacity) <= SINGLE_PLACEMENT_GROUP_MAX:
        return None
    props = {**((current or {}).get("properties") or {}), **(doc.get("properties") or {})}
    if props.get("singlePlacementGroup") is False:
        return None
    if current is None and "virtualMachineProfile" not in props:
        return None  # not a scale set
    return 400, {}, _err("InvalidParameter", f"The specified capacity {capacity} exceeds the maximum of "
                         f"{SINGLE_PLACEMENT_GROUP_MAX} virtual machines of a scale set with singlePlacementGroup "
                         "set to true.")


def _fault_response(fault: Fault, path: str) -> tuple[int, dict[str, str], Any]:
    if fault.kind == "throttle":
        # ARM's throttled answer: 429 with Retry-After in seconds
        # (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
        return 429, {"Retry-After": str(fault.retry_after_s)}, _err(
            "TooManyRequests", "The request is being throttled.")
    if fault.kind == "error500":
        return 500, {}, _err("InternalServerError", "An internal server error occurred.")
    if fault.kind == "quota":
        return 409, {}, _err("OperationNotAllowed", QUOTA_MESSAGE.format(family="standardNDSH100v5Family", loc="eastus"))
    if fault.kind == "locked":
        # A CanNotDelete/ReadOnly management lock: 409 ScopeLocked, worded as
        # https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-lock-resources quotes it.
        scope = path.split("?")[0]
        return 409, {}, _err("ScopeLocked", f"The scope '{scope}' cannot perform delete operation because "
                             f"following scope(s) are locked: '{scope}'. Please remove the lock and try again.")
    if fault.kind == "sku":
        return 409, {}, _err("SkuNotAvailable", "The requested VM size for resource "
                             "'Following SKUs have failed for Capacity Restrictions' is currently not available "
                             "in location 'eastus'.")
    raise ValueError(f"unknown fault kind {fault.kind}")


def _op_target(fake: FakeArm, path: str) -> str:
    op = fake.ops.get(path.rstrip("/").rsplit("/", 1)[1])
    return op.key if op else ""


def _filter_location(query: dict[str, list[str]]) -> str:
    m = re.search(r"location eq '([^']+)'", (query.get("$filter") or [""])[0])
    return m.group(1) if m else ""


def _rtype(path: str) -> str:
    if "/providers/" not in path:
        return "Microsoft.Resources/resourceGroups"
    segs = path.split("/providers/")[1].split("/")
    return "/".join([segs[0]] + segs[1::2])


def _action(method: str, path: str) -> str:
    """The Azure RBAC action a request performs: the resource type's read, write or delete
    (https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations),
    e.g. Microsoft.Resources/subscriptions/resourceGroups/delete for DELETE of a group."""
    verb = {"GET": "read", "HEAD": "read", "DELETE": "delete"}.get(method, "write")
    low = path.lower().rstrip("/")
    if low.endswith(_TAGS_AT_SCOPE):
        return f"Microsoft.Resources/tags/{verb}"
    if "/providers/" not in low:
        return ("Microsoft.Resources/subscriptions/resourceGroups/" if "/resourcegroups/" in low
                else "Microsoft.Resources/subscriptions/") + verb
    rtype = _rtype(path.rstrip("/"))
    if method == "POST":
        return f"{rtype}/{low.rsplit('/', 1)[1]}/action"
    return f"{rtype}/{verb}"


def _matches(pattern: str, action: str) -> bool:
    """An RBAC `actions` entry against an action: case-insensitive, `*` as a wildcard."""
    return re.fullmatch(re.escape(pattern.lower()).replace(r"\*", ".*"), action.lower()) is not None


def _role_def_key(ref: str) -> str:
    """Where a role definition is kept, whatever scope it was named under: its subscription-level
    id (/subscriptions/{sub}/providers/microsoft.authorization/roledefinitions/{guid}), lower case.
    `ref` is a role definition id or a request path naming one."""
    low = ref.lower().rstrip("/")
    m = re.match(r"/subscriptions/([^/]+)", low)
    return f"/subscriptions/{m.group(1) if m else SUB.lower()}{_ROLE_DEFS}{low.rsplit('/', 1)[-1]}"


def _claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        return dict(json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))))
    except (ValueError, TypeError):
        return {}


def _err(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _not_found(low: str) -> dict[str, Any]:
    return _err("ResourceNotFound", f"The Resource '{low}' was not found.")


def _handler(fake: FakeArm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes: without NODELAY, delayed ACKs add ~40 ms.
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            hdrs = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = fake.handle(self.command, self.path, body, hdrs)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-ms-request-id", f"req-{next(fake._ids)}")
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_DELETE = do_POST = do_PATCH = do_HEAD = _serve

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            return

    return Handler


def allow_plain_http_policy(client_tag: str | None = None) -> Any:
    """The per-call policy of azure-notes §5.1: bearer auth over http to the loopback fake.

    `client_tag` goes out as x-test-client, so the fake can tell one client "process" from another.
    """
    from azure.core.pipeline.policies import SansIOHTTPPolicy

    class AllowPlainHttp(SansIOHTTPPolicy[Any, Any]):
        def on_request(self, request: Any) -> None:
            request.context["enforce_https"] = False
            if client_tag:
                request.http_request.headers["x-test-client"] = client_tag

    return AllowPlainHttp()


def unsigned_jwt(claims: dict[str, Any]) -> str:
    """A JWT-shaped access token (header.payload.signature, base64url) with `claims`, unsigned:
    azbench reads claims (the `oid`) but never verifies a token; ARM does that."""
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()
    return f"{part({'typ': 'JWT', 'alg': 'none'})}.{part(claims)}.sig"


STUB_OID = "00000000-0000-4000-8000-00000000a11c"


class StubCredential:
    """A token credential that never reaches an identity provider; its tokens carry `oid` (the
    signed-in principal's object id) and `tid` (the tenant) as Entra's access tokens do
    (https://learn.microsoft.com/entra/identity-platform/access-token-claims-reference)."""

    oid = STUB_OID  # class defaults: subclasses need not call __init__
    tid = "00000000-0000-0000-0000-0000000000bb"

    def __init__(self, oid: str = STUB_OID, tid: str | None = None) -> None:
        self.oid = oid
        if tid is not None:
            self.tid = tid

    def get_token(self, *scopes: str, **kw: Any) -> Any:
        from azure.core.credentials import AccessToken
        return AccessToken(unsigned_jwt({"oid": self.oid, "tid": self.tid}), int(time.time()) + 3600)


def _keys(os_profile: dict[str, Any]) -> list[str]:
    ssh = (os_profile.get("linuxConfiguration") or {}).get("ssh") or {}
    return [k["keyData"] for k in ssh.get("publicKeys", [])]


def _tls_context(tls_dir: Path) -> tuple[Path, Any]:
    """A throw-away CA and a 127.0.0.1 server certificate it signed, under `tls_dir`."""
    import datetime as dt
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    tls_dir.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "azbench fake ARM test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=7))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = tls_dir / "ca.pem", tls_dir / "server.pem", tls_dir / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return ca_file, context


TENANT = "00000000-0000-0000-0000-0000000000bb"


def env_for(fake: FakeArm, caller_ip: str, *, client_id: str = "azbench-emulator",
            oid: str | None = None) -> dict[str, str]:
    """The environment that points the real SDKs (and so the azbench CLI) at `fake`, signed in
    as service principal `client_id` (its tokens' `oid` is `oid` when given): two client ids are
    two principals on one subscription."""
    assert fake.ca_file is not None, "env_for needs a fake started with tls_dir"
    if oid is not None:
        fake.client_oids[client_id] = oid
    return {"AZURE_RESOURCE_MANAGER_ENDPOINT": fake.base_url, "AZURE_AUTHORITY_HOST": fake.base_url,
            "AZURE_TENANT_ID": TENANT, "AZURE_CLIENT_ID": client_id,
            "AZURE_CLIENT_SECRET": "not-a-secret", "AZURE_SUBSCRIPTION_ID": SUB,
            "REQUESTS_CA_BUNDLE": str(fake.ca_file), "SSL_CERT_FILE": str(fake.ca_file),
            "AZBENCH_CALLER_IP": caller_ip}


def main(argv: list[str] | None = None) -> None:
    """`python -m testsupport.fake_arm --boot-vms --state DIR`: serve until killed; DIR/env.sh to source."""
    import argparse
    import shlex
    import signal

    parser = argparse.ArgumentParser(prog="python -m testsupport.fake_arm")
    parser.add_argument("--state", type=Path, required=True, help="directory for TLS files, VMs, env.sh")
    parser.add_argument("--boot-vms", action="store_true", help="boot every VM as an emulated VM")
    parser.add_argument("--location", default="eastus")
    args = parser.parse_args(argv)
    fabric = None
    if args.boot_vms:
        from testsupport.vm_emulator import Fabric, can_emulate
        reason = can_emulate()
        if reason:
            raise SystemExit(f"fake_arm: {reason}")
        fabric = Fabric(args.state / "fabric")
    fake = FakeArm(fabric=fabric, tls_dir=args.state / "tls")
    default_catalogue(fake, args.location)
    caller = fabric.gateway if fabric is not None else "127.0.0.1"
    env = env_for(fake, caller)
    (args.state / "env.sh").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
    fake.start()
    print(f"fake ARM at {fake.base_url}; source {args.state / 'env.sh'}; Ctrl-C stops it and every VM", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
