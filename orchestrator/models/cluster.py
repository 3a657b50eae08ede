"""A cluster as azbench records it: its common fields, how to reach its login node, and its
provider's own properties (one model per backend, told apart by `kind`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, SerializeAsAny, model_validator

from orchestrator import backends
from orchestrator.models.base import Frozen, utcnow
from orchestrator.models.states import ClusterState


class SshTarget(Frozen):
    """How to reach a cluster's login node. Host keys are pinned in `known_hosts`."""

    host: str
    port: int = 22
    user: str
    key_path: Path
    known_hosts: Path


class ProviderProps(Frozen):
    """What one provider records about a cluster beyond the common fields (Cluster.properties).

    One model per backend, in its folder (providers/<backend>/props.py, named by the registry's
    `Backend.props`), told apart by `kind` (the provider's name). Every field has a default, so
    the PROVISIONING record (stored before `up` creates anything) and older stores load; a
    backend fills in what its `down` and capabilities need."""

    kind: str = ""

    def deadline(self) -> datetime | None:
        """When the cluster deletes itself, or None (only self-expiring clusters have one)."""
        return None

    def with_deadline(self, when: datetime) -> ProviderProps:
        """These properties with the deadline moved to `when` (ValueError where none exists)."""
        raise ValueError(f"{type(self).__name__} records no expiry")

    @property
    def is_spot(self) -> bool:
        """Whether the cluster's nodes are spot (evictable) capacity."""
        return False

    def rack_size(self) -> int | None:
        """The VMs per NVLink rack the cluster was laid out with (GB200: 18, or 16 as Azure's
        record run; `resize` keeps whole racks of it), or None where the record does not say."""
        return None

    def principal(self) -> str | None:
        """The cloud principal that owns the cluster, as its resources record it (Azure: the
        azbench-owner tag, the signed-in object id), or None where the backend has none."""
        return None

    def up_notes(self) -> tuple[str, ...]:
        """What the backend saw someone else do to the cluster while `up` ran, and what it did
        about it (e.g. its tags rewritten by another writer, then restored): `up` records each
        as an `up_interference` event."""
        return ()


P = TypeVar("P", bound=ProviderProps)


def props_model(provider: str) -> type[ProviderProps]:
    """The model of what clusters of `provider` record (its backend's `props`); ValueError when
    no backend of that name is registered."""
    if provider not in backends.names():
        raise ValueError(f"no properties model for provider '{provider}'")
    model = backends.load(provider).props
    if not issubclass(model, ProviderProps):
        raise TypeError(f"provider '{provider}' records {model.__name__}, not a ProviderProps")
    return model


def _props_for(data: dict[str, Any]) -> ProviderProps:
    """The empty properties of the cluster's provider (a record with none recorded yet)."""
    return props_model(str(data.get("provider")))()


class Cluster(Frozen):
    """A cluster azbench created or adopted. `env` is exported before every remote command.
    `properties` is its provider's own record (a ProviderProps whose kind is `provider`); read
    it through `properties_as(AzureProps)`, which says so when the cluster is another kind."""

    name: str
    provider: str
    sku: str
    nodes: int
    region: str | None = None
    state: ClusterState = ClusterState.PROVISIONING
    node_names: list[str] = Field(default_factory=list)
    partition: str | None = None
    workdir: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    ssh: SshTarget | None = None
    cost_per_hour_usd: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    properties: SerializeAsAny[ProviderProps] = Field(default_factory=_props_for)

    @model_validator(mode="before")
    @classmethod
    def _typed_properties(cls, data: Any) -> Any:
        """A properties dict becomes the model its `kind` names (its backend's props). Rows
        stored before typed properties hold a plain dict without `kind`: its kind is the
        cluster's provider, and keys that model no longer has (Azure ML's unused `image`, ...)
        go."""
        if not isinstance(data, Mapping):
            return data
        props = data.get("properties")
        if not isinstance(props, Mapping):
            return data
        kind = props.get("kind", data.get("provider"))
        model = props_model(str(kind))
        if "kind" not in props:
            props = {k: v for k, v in props.items() if k in model.model_fields}
        return {**data, "properties": model.model_validate(props)}

    @model_validator(mode="after")
    def _props_match_provider(self) -> Cluster:
        if self.properties.kind != self.provider:
            raise ValueError(f"cluster '{self.name}' of provider '{self.provider}' cannot hold "
                             f"{type(self.properties).__name__} (kind '{self.properties.kind}')")
        return self

    def properties_as(self, cls: type[P]) -> P:
        """The properties as `cls`; TypeError naming both kinds when the cluster is another kind."""
        if not isinstance(self.properties, cls):
            raise TypeError(f"cluster '{self.name}' (provider '{self.provider}') has properties "
                            f"{type(self.properties).__name__}, not {cls.__name__}")
        return self.properties
