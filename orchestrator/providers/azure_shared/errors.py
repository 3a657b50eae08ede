"""Classify Azure Resource Manager failures by HTTP status first, ARM error code second, and map
them to azbench errors.

The status is the contract, the code is detail: every resource provider names its 404 codes
differently (ResourceNotFound, ResourceGroupNotFound, NotFound, ParentResourceNotFound,
Microsoft.Authorization's RoleAssignmentNotFound; azure-notes.md §10), so any 404 is "gone". 429
is throttling (retried by throttle.ArmRetryPolicy after Retry-After, within the `up`'s
throttling budget), 5xx is transient (azure-core's bounded retries), and a 409 is a conflict
unless its code says quota or SkuNotAvailable. The exception class says nothing (the generated
SDK code maps every synchronous 409 to ResourceExistsError, and an async AllocationFailed
arrives as an HttpResponseError with status 200), so for any other status `classify` reads
`err.error.code`, `details[].code` and, for OperationNotAllowed, the message (azure-notes.md
§4.1). Only capacity codes are retried by azbench itself (with zone/region fallback). Every
runtime ARM failure is exit 4 with the ARM code and the resource in one line; exit 3 belongs
to preflight (azure/preflight.py), before any write.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterator

from orchestrator import paths
from orchestrator.errors import CapacityError, ConfigError, PreflightError, ProvisionError


SDK_LOG_FILE = "azure-debug.log"  # under $AZBENCH_HOME/logs/ (signin.quiet_sdk_loggers)
_AADSTS = re.compile(r"(AADSTS\d+):\s*(.+?\.)(?=\s|$)")


class ArmErrorClass(str, Enum):
    THROTTLED = "throttled"          # azure-core already retried after Retry-After
    TRANSIENT = "transient"          # 5xx, RP lock: azure-core already retried
    CAPACITY = "capacity"            # retry slowly, next zone or region
    OVERCONSTRAINED = "overconstrained"  # relax constraints: not retryable as-is
    SKU_UNAVAILABLE = "sku_unavailable"  # fail fast
    QUOTA = "quota"                  # fail fast
    NOT_FOUND = "not_found"          # a delete of something gone is success
    CONFLICT = "conflict"            # 409: another operation holds the resource, or its state forbids it
    LOCKED = "locked"                # 409 ScopeLocked: a management lock forbids the write or delete
    DELETING = "deleting"            # 409 ResourceGroupBeingDeleted: a delete of the group is under way
    NO_SUBSCRIPTION = "no_subscription"  # 404 SubscriptionNotFound: the scope itself is unknown
    DENIED = "denied"                # 403 AuthorizationFailed: the principal lacks the action
    OTHER = "other"


CODE_TABLE: dict[str, ArmErrorClass] = {
    "TooManyRequests": ArmErrorClass.THROTTLED,
    "InternalServerError": ArmErrorClass.TRANSIENT,
    "RetryableErrorDueToAnotherOperation": ArmErrorClass.TRANSIENT,
    "AllocationFailed": ArmErrorClass.CAPACITY,
    "ZonalAllocationFailed": ArmErrorClass.CAPACITY,
    "OverconstrainedAllocationRequest": ArmErrorClass.OVERCONSTRAINED,
    "OverconstrainedZonalAllocationRequest": ArmErrorClass.OVERCONSTRAINED,
    "SkuNotAvailable": ArmErrorClass.SKU_UNAVAILABLE,
    "QuotaExceeded": ArmErrorClass.QUOTA,
    "ResourceNotFound": ArmErrorClass.NOT_FOUND,
    "ResourceGroupNotFound": ArmErrorClass.NOT_FOUND,
    "NotFound": ArmErrorClass.NOT_FOUND,
    # A management lock (CanNotDelete or ReadOnly) on the resource, its group or subscription
    # (https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources; the
    # code as https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/
    # error-lock-resources quotes it).
    "ScopeLocked": ArmErrorClass.LOCKED,
    # "ResourceGroupBeingDeleted: Wait for deletion to complete."
    # (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors)
    "ResourceGroupBeingDeleted": ArmErrorClass.DELETING,
    "AuthorizationFailed": ArmErrorClass.DENIED,
}
# A 404 whose code names the subscription, not the resource: the request's scope does not exist
# (or this principal cannot see it). "SubscriptionNotFound: A specified subscription for
# deployment can't be accessed. It could be the subscription ID is wrong, the user deploying
# the template doesn't have adequate permissions..." (common-deployment-errors, above). Never
# read as "the resource is gone": a delete would call it success.
SCOPE_MISSING_CODES = frozenset({"SubscriptionNotFound", "InvalidSubscriptionId"})
RETRYABLE_BY_AZBENCH = frozenset({ArmErrorClass.CAPACITY})
# Kept while the operation may still finish: a rerun resumes it from its continuation token.
RESUMABLE = frozenset({ArmErrorClass.THROTTLED, ArmErrorClass.TRANSIENT})
HINTS: dict[ArmErrorClass, str] = {
    ArmErrorClass.QUOTA: "request more quota in the Azure portal or use fewer nodes",
    ArmErrorClass.SKU_UNAVAILABLE: "pick another size, zone or region",
    ArmErrorClass.OVERCONSTRAINED: "relax azure.zones or pick another region",
    ArmErrorClass.CONFLICT: "another operation holds this resource: wait for it, then rerun",
    ArmErrorClass.LOCKED: ("a management lock on the resource, its group or the subscription forbids this "
                           "(`az lock list`): its owner must remove the lock, then rerun"),
    ArmErrorClass.DELETING: "the resource group is being deleted: wait until it is gone, then rerun",
    ArmErrorClass.DENIED: "the signed-in principal lacks this permission (see README, Spending safely)",
    ArmErrorClass.THROTTLED: "ARM is throttling this subscription: rerun later (up resumes where it stopped)",
    ArmErrorClass.TRANSIENT: "an Azure-side error: rerun (up resumes where it stopped)",
}


@dataclass(frozen=True)
class ArmError:
    code: str
    message: str
    request_id: str | None
    status: int | None
    details: tuple[str, ...] = ()
    cls: ArmErrorClass = ArmErrorClass.OTHER


class AzureErrorMixin:
    """ARM facts carried by every azbench error raised from an Azure call."""

    code: str = ""
    request_id: str | None = None
    arm_message: str = ""


class AzureProvisionError(AzureErrorMixin, ProvisionError):
    pass


class AzureCapacityError(AzureErrorMixin, CapacityError):
    pass


class AzurePreflightError(AzureErrorMixin, PreflightError):
    pass


class AzureConfigError(AzureErrorMixin, ConfigError):
    """ARM refused the request's scope itself (an unknown subscription): the user's to fix. Exit 2."""


class SignInError(AzureErrorMixin, PreflightError):
    """The credential could not get a token (a wrong secret, no login): one line with Entra's
    AADSTS code and message (signin.py). Exit 3: nothing was written."""

    kind = "sign-in failed"


class ThrottleBudgetSpent(AzureErrorMixin, ProvisionError):
    """ARM kept answering 429 longer than the throttling budget of this `up`
    (azure.throttle_budget_s): one line naming what was throttled and for how long. Exit 4."""

    kind = "throttled"
    code = "TooManyRequests"


def classify(status: int | None, code: str, message: str = "", details: tuple[str, ...] = ()) -> ArmErrorClass:
    """The error class of an ARM answer: HTTP status first (404 gone, 429 throttled, 5xx
    transient, 409 a conflict unless the code says quota or SKU), then the code. A 404 is gone
    unless its code names the subscription itself (SCOPE_MISSING_CODES)."""
    if status == 404:
        return ArmErrorClass.NO_SUBSCRIPTION if code in SCOPE_MISSING_CODES else ArmErrorClass.NOT_FOUND
    if status == 429:
        return ArmErrorClass.THROTTLED
    if status is not None and status >= 500:
        return ArmErrorClass.TRANSIENT
    by_code = classify_code(code, message, details)
    if status == 409 and by_code in (ArmErrorClass.OTHER, ArmErrorClass.NOT_FOUND, ArmErrorClass.DENIED):
        return ArmErrorClass.CONFLICT
    if status == 403:
        return ArmErrorClass.DENIED
    return by_code


def classify_code(code: str, message: str = "", details: tuple[str, ...] = ()) -> ArmErrorClass:
    """The error class for an ARM code alone (plus details/message for the ambiguous codes): for
    answers without a telling status, e.g. an async operation's failure (HTTP 200)."""
    if code == "OperationNotAllowed":
        if "TooManyRequests" in details:
            return ArmErrorClass.THROTTLED
        if "quota" in message.lower():
            return ArmErrorClass.QUOTA
        return ArmErrorClass.OTHER
    if code in CODE_TABLE:
        return CODE_TABLE[code]
    for detail in details:
        if detail in CODE_TABLE:
            return CODE_TABLE[detail]
    return ArmErrorClass.OTHER


def arm_error(exc: BaseException) -> ArmError:
    """The ARM error inside an azure-core HttpResponseError (or any exception: no status, its
    class name for a code). azure-core leaves `error` None when the body was no OData error."""
    from azure.core.exceptions import AzureError, HttpResponseError
    status = code = request_id = None
    message = exc.message if isinstance(exc, AzureError) else ""
    details: tuple[str, ...] = ()
    if isinstance(exc, HttpResponseError):
        status = exc.status_code
        if exc.error is not None:
            code, message = exc.error.code, exc.error.message or message
            details = tuple(d.code or "" for d in exc.error.details)
        request_id = _request_id(exc.response)
    code, message = code or "", message or str(exc)
    if not code and status == 404:
        code = "NotFound"
    if not code and status is not None and status >= 500:
        code = "InternalServerError"
    return ArmError(code=code or type(exc).__name__, message=_first_line(message), request_id=request_id,
                    status=status, details=details, cls=classify(status, code, message, details))


def to_azbench(err: ArmError, what: str) -> (AzureProvisionError | AzureCapacityError | AzurePreflightError
                                              | AzureConfigError):
    """The azbench error for `err` raised while doing `what` (e.g. 'create scale set x')."""
    rid = f" (x-ms-request-id {err.request_id})" if err.request_id else ""
    status = f"HTTP {err.status} " if err.status and err.status >= 400 else ""
    text = f"{what}: {status}{err.code}: {err.message}{rid}"
    if err.cls == ArmErrorClass.NO_SUBSCRIPTION:  # a wrong subscription id is the user's: exit 2
        bad = AzureConfigError(text, hint="check AZURE_SUBSCRIPTION_ID (or azure.subscription_id) and that the "
                                          "signed-in principal has a role on that subscription")
        bad.code, bad.request_id, bad.arm_message = err.code, err.request_id, err.message
        return bad
    if err.cls == ArmErrorClass.CAPACITY:
        out: AzureProvisionError | AzureCapacityError = AzureCapacityError(text, hint="azbench tries the next zone/region from azure.zones "
                                                 "and azure.fallback_regions; or retry later with fewer nodes")
    else:
        # A refusal that comes while writing is a runtime failure (exit 4), whatever its cause:
        # preflight's own checks (preflight.py) are the exit-3 ones.
        out = AzureProvisionError(text, hint=HINTS.get(err.cls))
    out.code, out.request_id, out.arm_message = err.code, err.request_id, err.message
    return out


@contextlib.contextmanager
def arm_call(what: str) -> Iterator[None]:
    """Turn an azure-core HttpResponseError raised inside into the matching azbench error."""
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
    try:
        yield
    except ClientAuthenticationError as exc:  # the token request failed (or ARM's 401)
        raise signin_error(exc) from exc
    except HttpResponseError as exc:
        raise to_azbench(arm_error(exc), what) from exc


def is_not_found(exc: BaseException) -> bool:
    """Gone: any HTTP 404, whatever the resource provider calls it (Azure ML answers e.g.
    UserError or WorkspaceNotFound with 404 for a missing job or workspace)."""
    from azure.core.exceptions import HttpResponseError
    return isinstance(exc, HttpResponseError) and arm_error(exc).cls == ArmErrorClass.NOT_FOUND


def is_resumable(exc: BaseException) -> bool:
    """An operation failure after which the operation may still finish (429, 5xx, a dropped
    connection): its continuation token must be kept. ThrottleBudgetSpent is one too."""
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ThrottleBudgetSpent)):
        return True
    return isinstance(exc, HttpResponseError) and arm_error(exc).cls in RESUMABLE


def signin_message(text: str) -> str:
    """'AADSTS7000215: Invalid client secret provided.' (Entra's code and the first sentence of
    its error_description) from an azure-identity error text, else its first non-empty line."""
    match = _AADSTS.search(text)
    if match:
        return f"{match.group(1)}: {match.group(2)}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no credential could sign in"


def signin_error(exc: BaseException) -> SignInError:
    """SignInError for azure-identity's (multi-line) ClientAuthenticationError."""
    from azure.core.exceptions import AzureError
    text = (exc.message if isinstance(exc, AzureError) else "") or str(exc)
    match = _AADSTS.search(text)
    hints = [] if match else ["sign in with `az login`, or set AZURE_TENANT_ID, AZURE_CLIENT_ID and "
                              "AZURE_CLIENT_SECRET"]
    hints.append(f"details in {paths.home() / 'logs' / SDK_LOG_FILE}")
    err = SignInError(signin_message(text), hint="; ".join(hints))
    err.code = match.group(1) if match else ""
    return err


def _request_id(response: object) -> str | None:
    """ARM's x-ms-request-id of a failed response. azure-core types an error's response as a
    protocol without headers (exceptions._HttpResponseCommonAPI); the responses its pipelines
    produce, current (azure.core.rest) and legacy (pipeline.transport), carry them."""
    from azure.core.pipeline.transport import HttpResponse as LegacyResponse
    from azure.core.rest import HttpResponse
    if isinstance(response, (HttpResponse, LegacyResponse)):
        return response.headers.get("x-ms-request-id")
    return None


def _first_line(text: str) -> str:
    text = str(text).strip()
    if text.startswith("(") and ") " in text:  # azure-core's "(Code) message" form
        text = text.split(") ", 1)[1]
    return text.splitlines()[0] if text else ""

