"""Classify Azure Resource Manager failures by their ARM error code and map them to azbench errors.

The generated SDK code maps every synchronous 409 to ResourceExistsError whatever the code, and an
async AllocationFailed arrives as a plain HttpResponseError with status 200, so the exception
class says nothing: `classify` reads `err.error.code`, `details[].code` and, for
OperationNotAllowed, the message (azure-notes.md §4.1). 429 and 5xx are retried inside azure-core's
RetryPolicy; only capacity codes are retried by azbench (with zone/region fallback).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator

from orchestrator.errors import CapacityError, PreflightError, ProvisionError


class ArmErrorClass(str, Enum):
    THROTTLED = "throttled"          # azure-core already retried after Retry-After
    TRANSIENT = "transient"          # 5xx, RP lock: azure-core already retried
    CAPACITY = "capacity"            # retry slowly, next zone or region
    OVERCONSTRAINED = "overconstrained"  # relax constraints: not retryable as-is
    SKU_UNAVAILABLE = "sku_unavailable"  # fail fast
    QUOTA = "quota"                  # fail fast
    NOT_FOUND = "not_found"          # a delete of something gone is success
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
}
RETRYABLE_BY_AZBENCH = frozenset({ArmErrorClass.CAPACITY})


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


def classify_code(code: str, message: str = "", details: tuple[str, ...] = ()) -> ArmErrorClass:
    """The error class for an ARM code (plus details/message for the ambiguous codes)."""
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
    """The ARM error inside an azure-core HttpResponseError (or any exception)."""
    odata = getattr(exc, "error", None)
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None)
    code = getattr(odata, "code", None) or ""
    message = getattr(odata, "message", None) or getattr(exc, "message", None) or str(exc)
    details = tuple(getattr(d, "code", "") or "" for d in (getattr(odata, "details", None) or []))
    request_id = None
    if response is not None and getattr(response, "headers", None) is not None:
        request_id = response.headers.get("x-ms-request-id")
    if not code and status == 404:
        code = "NotFound"
    if not code and status is not None and status >= 500:
        code = "InternalServerError"
    return ArmError(code=code or type(exc).__name__, message=_first_line(message), request_id=request_id,
                    status=status, details=details, cls=classify_code(code, message, details))


def to_azbench(err: ArmError, what: str) -> AzureProvisionError | AzureCapacityError | AzurePreflightError:
    """The azbench error for `err` raised while doing `what` (e.g. 'create scale set x')."""
    rid = f" (x-ms-request-id {err.request_id})" if err.request_id else ""
    text = f"{what}: {err.code}: {err.message}{rid}"
    if err.cls == ArmErrorClass.CAPACITY:
        out: Any = AzureCapacityError(text, hint="azbench tries the next zone/region from azure.zones "
                                                 "and azure.fallback_regions; or retry later with fewer nodes")
    elif err.cls in (ArmErrorClass.SKU_UNAVAILABLE, ArmErrorClass.QUOTA):
        hint = ("request more quota in the Azure portal or use fewer nodes"
                if err.cls == ArmErrorClass.QUOTA else "pick another size, zone or region")
        # ARM refused a write: a runtime failure (exit 4) with the code and resource, not a
        # preflight one (exit 3): writes may already have happened, and `down` must find them.
        out = AzureProvisionError(text, hint=hint)
    else:
        out = AzureProvisionError(text)
    out.code, out.request_id, out.arm_message = err.code, err.request_id, err.message
    return out


@contextlib.contextmanager
def arm_call(what: str) -> Iterator[None]:
    """Turn an azure-core HttpResponseError raised inside into the matching azbench error."""
    from azure.core.exceptions import HttpResponseError
    try:
        yield
    except HttpResponseError as exc:
        raise to_azbench(arm_error(exc), what) from exc


def is_not_found(exc: BaseException) -> bool:
    from azure.core.exceptions import HttpResponseError
    return isinstance(exc, HttpResponseError) and arm_error(exc).cls == ArmErrorClass.NOT_FOUND


def _first_line(text: str) -> str:
    text = str(text).strip()
    if text.startswith("(") and ") " in text:  # azure-core's "(Code) message" form
        text = text.split(") ", 1)[1]
    return text.splitlines()[0] if text else ""


def is_missing(exc: BaseException) -> bool:
    """Gone: an ARM not-found code, or any 404 (Azure ML answers e.g. UserError or
    WorkspaceNotFound with 404 for a missing job or workspace)."""
    return is_not_found(exc) or getattr(exc, "status_code", None) == 404
