"""ARM throttling: honour Retry-After on every 429, within one total budget per `up`.

ARM answers 429 with a Retry-After (seconds; the Compute RP's per-resource policies can ask for
20 minutes) when a token bucket of the subscription or principal is empty
(https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling,
azure-notes.md §4.2). azure-core's RetryPolicy would retry a 429 at most `retry_total` (10) times
and then fail the whole `up`. `ArmRetryPolicy` takes 429s out of that count: it waits exactly
what Retry-After asks and sends again, for as long as the shared `ThrottleBudget`
(azure.throttle_budget_s) lasts, and then raises ThrottleBudgetSpent: one line saying what was
throttled, how often and for how long. 5xx and dropped connections stay with azure-core's
bounded retries (which honour Retry-After too). The policy sits in every request's pipeline,
LRO polls included, so a poller resumes its operation after a throttled poll instead of failing.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from orchestrator.providers.azure_shared.errors import ThrottleBudgetSpent

if TYPE_CHECKING:
    from azure.core.pipeline import PipelineRequest, PipelineResponse
    from azure.core.pipeline.policies import RetryPolicy
    from azure.core.rest import HttpRequest, HttpResponse

DEFAULT_BUDGET_S = 1200.0  # the longest Retry-After ARM documents for the Compute RP (20 min)
NO_RETRY_AFTER_WAIT_S = 10.0  # ARM always sends Retry-After with a 429; this is the fallback


@dataclass
class ThrottleBudget:
    """Seconds of Retry-After waits left for one `up` (or `down`, `sweep`), shared by its threads.

    `sleep` is how a wait is spent (tests record it instead of sleeping)."""

    budget_s: float = DEFAULT_BUDGET_S
    sleep: Callable[[float], None] = time.sleep
    waited_s: float = 0.0
    throttled: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self, budget_s: float | None = None) -> None:
        with self._lock:
            if budget_s is not None:
                self.budget_s = budget_s
            self.waited_s = 0.0
            self.throttled.clear()

    def take(self, wait_s: float, what: str) -> None:
        """Book a wait of `wait_s` for `what`; ThrottleBudgetSpent when it does not fit."""
        with self._lock:
            self.throttled[what] += 1
            if self.waited_s + wait_s > self.budget_s:
                raise ThrottleBudgetSpent(self._summary(wait_s), hint=(
                    "rerun later (up resumes where it stopped), or raise azure.throttle_budget_s"))
            self.waited_s += wait_s

    def _summary(self, wait_s: float) -> str:
        total = sum(self.throttled.values())
        top = ", ".join(f"{what} x{n}" for what, n in self.throttled.most_common(3))
        more = f" and {len(self.throttled) - 3} more" if len(self.throttled) > 3 else ""
        return (f"ARM throttled {total} request(s) (HTTP 429) for {self.waited_s:.0f} s in all, and asks "
                f"for {wait_s:.0f} s more: over the {self.budget_s:.0f} s throttling budget "
                f"(azure.throttle_budget_s); throttled: {top}{more}")


def _what(request: HttpRequest) -> str:
    """'PUT virtualMachineScaleSets/x' (or 'GET operation') for a throttled request."""
    path = request.url.split("?", 1)[0].rstrip("/")
    if "/operations/" in path.lower():
        return f"{request.method} operation status"
    return f"{request.method} {'/'.join(path.split('/')[-2:])}"


def retry_policy(budget: ThrottleBudget, *, retry_total: int | None = None,
                 retry_backoff_factor: float | None = None) -> RetryPolicy[HttpRequest, HttpResponse]:
    """An ArmRetryPolicy (azure-core RetryPolicy subclass, imported lazily) over `budget`;
    azure-core's defaults for the settings left None."""
    from azure.core.pipeline.policies import RetryPolicy
    from azure.core.rest import HttpRequest, HttpResponse

    class ArmRetryPolicy(RetryPolicy[HttpRequest, HttpResponse]):
        # As RetryPolicyBase.is_retry types them: `settings` a dict of its retry counters, the
        # request and response types method-level variables over azure-core's (legacy, async) ones.
        def is_retry(self, settings: dict[str, Any], response: PipelineResponse[Any, Any]) -> bool:
            if response.http_response.status_code == 429:
                return False  # ours, below: not counted against retry_total
            return bool(super().is_retry(settings, response))

        def send(self, request: PipelineRequest[HttpRequest]) -> PipelineResponse[HttpRequest, HttpResponse]:
            while True:
                response = super().send(request)
                if response.http_response.status_code != 429:
                    return response
                wait = self.get_retry_after(response)
                wait = NO_RETRY_AFTER_WAIT_S if wait is None else max(0.0, float(wait))
                budget.take(wait, _what(request.http_request))
                budget.sleep(wait)

    settings: dict[str, float] = {}
    if retry_total is not None:
        settings["retry_total"] = retry_total
    if retry_backoff_factor is not None:
        settings["retry_backoff_factor"] = retry_backoff_factor
    return ArmRetryPolicy(**settings)
