"""The azbench error tree: every user-facing failure is one of these, with its exit code.

The CLI's single error handler turns an AzbenchError into one line on stderr and `exit_code`;
anything else is a bug (exit 1, traceback with --debug).
"""

from __future__ import annotations


class AzbenchError(Exception):
    """Base of every expected failure. `exit_code` is the process exit status the CLI uses."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class ConfigError(AzbenchError):
    """Bad user input: a spec file, a flag, an unknown name. Exit 2."""

    exit_code = 2
    kind = "config error"


class NotFoundError(ConfigError):
    """A named thing (cluster, run, recipe, SKU) does not exist. Exit 2."""

    kind = "not found"


class NotOwnerError(ConfigError):
    """The cluster belongs to another owner: `down` needs --force, `up` another name. Exit 2."""

    kind = "not yours"


class PreflightError(AzbenchError):
    """Checks before any resource is created failed (quota, SKU, tools missing). Exit 3."""

    exit_code = 3
    kind = "preflight failed"


class ProvisionError(AzbenchError):
    """Creating or deleting cluster resources failed. Exit 4."""

    exit_code = 4
    kind = "provisioning failed"


class ShrinkError(ProvisionError):
    """A shrink that could not take every node out: `kept` names those still in the cluster
    (drained by the caller, who returns them to service). Exit 4."""

    def __init__(self, message: str, *, kept: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kept = list(kept)


class CapacityError(ProvisionError):
    """The cloud had no capacity (AllocationFailed); retryable elsewhere or later. Exit 4."""

    kind = "no capacity"


class LostRaceError(ProvisionError):
    """Another `up` of the same cluster created it first (seen by the cloud's answer, e.g. ARM's
    200 instead of 201 Created for a group this `up` read as absent): this `up` stops before its
    next write and its leftovers are not its own to delete. Exit 4."""

    kind = "provisioning stopped"


class RemoteError(AzbenchError):
    """A host could not be reached or refused us (SSH, host key, timeout). Exit 5."""

    exit_code = 5
    kind = "remote error"


class LaunchError(AzbenchError):
    """A job could not be submitted, watched or fetched. Exit 5."""

    exit_code = 5
    kind = "launch failed"


class RunFailedError(AzbenchError):
    """A benchmark run ended without a result. Exit 5."""

    exit_code = 5
    kind = "run failed"


class StoreError(AzbenchError):
    """The results store cannot be opened or written. Exit 6."""

    exit_code = 6
    kind = "store error"


class NotAvailableError(AzbenchError):
    """A command or back end that is planned but not built yet. Exit 7."""

    exit_code = 7
    kind = "not available"


class MissingCapability(NotAvailableError):
    """The cluster cannot do this (its provider or launcher lacks the capability). Exit 7.

    The typed answer to an absent capability (seams.Capabilities), so nothing above the
    providers probes objects or gets a silent failure."""

    kind = "not available"

    def __init__(self, cluster: str, backend: str, what: str, *, hint: str | None = None) -> None:
        super().__init__(f"cluster '{cluster}' ({backend}) cannot {what}", hint=hint)
        self.cluster, self.backend, self.what = cluster, backend, what


class MissingExtra(NotAvailableError):
    """A command needs an extra that is not installed (`pip install 'azbench[EXTRA]'`). Exit 7.

    `what` names what the extra gives ("the Azure SDKs", backends.EXTRAS); `subject` says
    what asked for it ("--provider azure"); the CLI's handler puts the command
    in front: `azbench up --provider azure needs the Azure SDKs: pip install 'azbench[azure]'`."""

    kind = "not installed"

    def __init__(self, extra: str, what: str, subject: str = "", *, module: str = "") -> None:
        self.extra, self.subject, self.module = extra, subject, module
        self.needs = f"needs {what}: pip install 'azbench[{extra}]'"
        super().__init__(f"{subject} {self.needs}" if subject else self.needs)


class RegressionError(AzbenchError):
    """A comparison against a baseline found a regression. Exit 8."""

    exit_code = 8
    kind = "regression"


EXIT_UNHEALTHY = 9  # `azbench health` flagged nodes (cli/health.py); no exception carries it
EXIT_FABRIC = 10  # a fabric verdict failed (cli/fabric.py: `fabric inspect`, `fabric test`)
EXIT_INTERRUPTED = 130  # 128 + SIGINT

# The one exit-code table: `azbench --help` prints it and README.md's "Exit codes" table is
# checked against it (tests/test_exit_codes.py). Every AzbenchError's exit_code is a key here.
EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "internal error (a bug: rerun with --debug and report it)",
    2: "usage or configuration error (bad flag, spec file, unknown name, a path you named that cannot be written)",
    3: "preflight failed (quota, SKU availability, missing tools such as Slurm)",
    4: "provisioning failed (cloud or local cluster resources, no capacity)",
    5: "run failed (remote unreachable, wrong host key, launch or benchmark failure)",
    6: "results store error (unwritable AZBENCH_HOME, disk full, corrupt or newer database)",
    7: "not available: a feature not built yet, a capability this cluster lacks, or an extra "
       "not installed (the line names it: pip install 'azbench[azure]')",
    8: "performance regression against the baseline",
    EXIT_UNHEALTHY: "health check flagged nodes (drained, or a fabric-wide fault); "
                    "the report is printed first",
    EXIT_FABRIC: "a fabric verdict failed (NCCL channels over NET/Socket, wrong values in a "
                 "collective); warnings alone exit 0; the report is printed first",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C), aborted at a prompt, or detached from a run; "
                      "a pipeline stopped by signal N exits 128+N",
}
