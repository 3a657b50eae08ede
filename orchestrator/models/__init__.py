"""Typed values that flow between the parts: plans, clusters, jobs, command results.

Pydantic models cross process or file boundaries (store rows, --json output); they are the
contract between providers, launchers, the monitor and the CLI. One module per noun:
base (UTC time, the frozen model), states (the state machines of clusters, runs, attempts),
plans (what `up` would do), cluster (a cluster and its provider's properties), jobs (what a
scheduler and a runner report), attempt (an attempt as a launcher submits it), job_plans (jobs a
launcher writes itself: health gate, fabric test, staging), model_facts (what MFU needs). Every
public name is re-exported here: import from `orchestrator.models`.
"""

from __future__ import annotations

from orchestrator.models.base import (
    Frozen,
    local_owner,
    parse_utc,
    utcnow,
)
from orchestrator.models.states import (
    ATTEMPT_MOVES,
    CLUSTER_MOVES,
    FINAL_ATTEMPT_STATES,
    FINAL_RUN_STATES,
    RUN_MOVES,
    AttemptState,
    ClusterState,
    RunState,
    legal_move,
)
from orchestrator.models.plans import (
    Plan,
    PlannedResource,
    ScaleSetPlan,
    SpecSection,
)
from orchestrator.models.cluster import (
    P,
    Cluster,
    ProviderProps,
    SshTarget,
    props_model,
)
from orchestrator.models.jobs import (
    BAD_NODE_STATES,
    ExecResult,
    JobRef,
    JobState,
    JobStatus,
    NodeInfo,
    named_nodes,
)
from orchestrator.models.attempt import (
    AttemptSpec,
    ContainerRun,
    DataInput,
    FabricOverride,
    MountedData,
    Parallelism,
)
from orchestrator.models.job_plans import (
    ContainerBuild,
    FabricTestPlan,
    HealthCheckPlan,
    StageItem,
    StageRequest,
    StageStep,
)
from orchestrator.models.model_facts import (
    ModelFacts,
)

__all__ = [
    "ATTEMPT_MOVES",
    "AttemptSpec",
    "AttemptState",
    "BAD_NODE_STATES",
    "CLUSTER_MOVES",
    "Cluster",
    "ClusterState",
    "ContainerBuild",
    "ContainerRun",
    "DataInput",
    "ExecResult",
    "FINAL_ATTEMPT_STATES",
    "FINAL_RUN_STATES",
    "FabricOverride",
    "FabricTestPlan",
    "Frozen",
    "HealthCheckPlan",
    "JobRef",
    "JobState",
    "JobStatus",
    "ModelFacts",
    "MountedData",
    "NodeInfo",
    "P",
    "Parallelism",
    "Plan",
    "PlannedResource",
    "ProviderProps",
    "RUN_MOVES",
    "RunState",
    "ScaleSetPlan",
    "SpecSection",
    "SshTarget",
    "StageItem",
    "StageRequest",
    "StageStep",
    "legal_move",
    "local_owner",
    "named_nodes",
    "parse_utc",
    "props_model",
    "utcnow",
]
