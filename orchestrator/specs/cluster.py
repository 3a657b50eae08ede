"""What users write to get a cluster: ClusterSpec, from YAML and CLI flags.

The common fields (name, provider, size, nodes, region, tags) are checked here; each backend's
own section (`local:`, `ssh:`, `azure:`, `azureml:`) is checked by that backend's settings
model, found through the registry (orchestrator.backends) by the section's key, so a new
backend's section needs no line here. Errors keep their place: `spec.yaml:7: azure.vnet_cidr: ...`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    Field,
    SerializationInfo,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from orchestrator import backends
from orchestrator.hardware import catalog
from orchestrator.hardware.regions import check_region
from orchestrator.models import Frozen, SpecSection
from orchestrator.specs.values import NodeCount, between, load_spec

S = TypeVar("S", bound=SpecSection)

# Tag rules as Azure documents them (https://learn.microsoft.com/azure/azure-resource-manager/
# management/tag-resources#limitations): at most 50 tags a resource, a name of at most 512
# characters without < > % & \ ? /, a value of at most 256; names are case-insensitive. azbench's
# own tags (the azbench- prefix, at most 8 of them on a resource) take part of the 50.
TAG_FORBIDDEN = set("<>%&\\?/")
AZBENCH_TAG_PREFIX = "azbench-"
MAX_USER_TAGS = 50 - 8


USD = Annotated[float, between(0.01, 1e9, " USD")]


class Budget(Frozen):
    """`budget:` what an owner may spend per `period` (list price, every cluster of theirs in
    the store) before `up` warns; it never refuses (the cost cap refuses). `usd` is any owner's,
    `owners` names some owners' own (the Azure principal's object id, or $AZBENCH_OWNER/$USER)."""

    usd: USD | None = None
    owners: dict[str, USD] = Field(default_factory=dict)
    period: Literal["month", "week", "all"] = "month"

    def for_owner(self, owner: str) -> float | None:
        return self.owners.get(owner, self.usd)

    def since(self, now: datetime) -> datetime | None:
        """The period's start (UTC): the first of this month, this Monday, or None (all time)."""
        day = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        if self.period == "month":
            return day.replace(day=1)
        if self.period == "week":
            return day - timedelta(days=day.weekday())
        return None

    @property
    def label(self) -> str:
        return {"month": "monthly", "week": "weekly", "all": "total"}[self.period]


class ClusterSpec(Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,38}$")
    provider: str = "local"
    sku: str | None = None
    nodes: NodeCount
    region: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    budget: Budget | None = None  # each owner's spend `up` warns about (clusters.spending)
    # Each backend's section, by its key, validated by the backend's own settings model. Written
    # by users as top-level keys (`azure: {...}`), and dumped back the same way.
    sections: dict[str, SerializeAsAny[SpecSection]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _backend_sections(cls, data: Any) -> Any:
        """Move each backend's section into `sections`, validated by its settings model."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        given = data.pop("sections", None)
        if given is not None and not (isinstance(given, dict)
                                      and all(isinstance(v, SpecSection) for v in given.values())):
            # Not ours: a user wrote `sections:`, which is no key of a spec.
            raise ValidationError.from_exception_data(
                cls.__name__, [{"type": "extra_forbidden", "loc": ("sections",), "input": given}])
        found: dict[str, SpecSection] = dict(given or {})
        errors: list[Any] = []
        for name in backends.names():
            if name not in data:
                continue
            model = backends.load(name).settings
            if model is None:
                continue  # a backend with no section: its key stays, and is unknown
            raw = data.pop(name)
            if isinstance(raw, SpecSection):
                found[name] = raw
                continue
            try:
                section = model.model_validate({} if raw is None else raw)
            except ValidationError as exc:
                errors += [{**e, "loc": (name, *e["loc"])} for e in exc.errors(include_url=False)]
                continue
            assert isinstance(section, SpecSection), f"{name}'s settings must be a SpecSection"
            found[name] = section
        if errors:  # the rest of the spec too, so one error names every wrong field
            try:
                cls.model_validate({**data, "sections": found})
            except ValidationError as exc:
                errors += exc.errors(include_url=False)
            raise ValidationError.from_exception_data(cls.__name__, errors)
        data["sections"] = found
        return data

    @model_serializer(mode="wrap")
    def _flat_sections(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """Sections dump as the top-level keys users write (stored specs keep their shape)."""
        out = handler(self)
        if isinstance(out, dict):
            out.update(out.pop("sections", None) or {})
            if out.get("budget") is None:  # specs stored before budgets keep their shape
                out.pop("budget", None)
        return out

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        """Tags as Azure accepts them (TAG_FORBIDDEN and the limits above): every backend's
        cloud tags are Azure's today."""
        if len(value) > MAX_USER_TAGS:
            raise ValueError(f"{len(value)} tags: at most {MAX_USER_TAGS} (Azure allows 50 on a resource, "
                             f"azbench uses up to {50 - MAX_USER_TAGS})")
        seen: dict[str, str] = {}
        for name, text in value.items():
            shown = name if len(name) <= 40 else name[:37] + "..."
            if not name.strip():
                raise ValueError("a tag name must not be empty")
            bad = sorted(TAG_FORBIDDEN.intersection(name))
            if bad:
                raise ValueError(f"tag name {shown!r} contains {' '.join(bad)} (Azure refuses < > % & \\ ? /)")
            if len(name) > 512:
                raise ValueError(f"tag name {shown!r} is {len(name)} characters long (Azure allows 512)")
            if len(text) > 256:
                raise ValueError(f"the value of tag {shown!r} is {len(text)} characters long (Azure allows 256)")
            if name.lower().startswith(AZBENCH_TAG_PREFIX):
                raise ValueError(f"tag name {shown!r}: the {AZBENCH_TAG_PREFIX} prefix is azbench's own")
            if name.lower() in seen:
                raise ValueError(f"tag names {seen[name.lower()]!r} and {shown!r} are the same to Azure "
                                 "(tag names are case-insensitive)")
            seen[name.lower()] = shown
        return value

    @field_validator("sku")
    @classmethod
    def _sku(cls, value: str | None) -> str | None:
        return None if value is None else catalog.lookup(value).name

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        return None if value is None else check_region(value)

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        if value not in backends.names():
            raise ValueError(f"unknown provider '{value}' (choose from {', '.join(backends.names())})")
        return value

    @model_validator(mode="after")
    def _provider_rules(self) -> ClusterSpec:
        sku = backends.check_spec(self.provider, self.sku, self.region, set(self.sections))
        object.__setattr__(self, "sku", sku)
        return self

    @property
    def sku_row(self) -> catalog.GpuSku:
        return catalog.lookup(self.sku or backends.LOCAL_SKU)

    def section(self, model: type[S]) -> S:
        """The spec's section of `model`'s backend (model.KEY), or its defaults when the spec has
        none. TypeError if the stored section is another model."""
        found = self.sections.get(model.KEY)
        if found is None:
            return model()
        if not isinstance(found, model):
            raise TypeError(f"section '{model.KEY}' is a {type(found).__name__}, not {model.__name__}")
        return found

    def own_section(self) -> SpecSection | None:
        """The section of the spec's own provider: the one written, else its defaults; None for a
        backend that reads no section."""
        if self.provider in self.sections:
            return self.sections[self.provider]
        model = backends.load(self.provider).settings
        if model is None:
            return None
        section = model()
        assert isinstance(section, SpecSection)
        return section

    def with_section(self, section: SpecSection) -> ClusterSpec:
        """This spec with `section` in place of its backend's (a copy; nothing re-validated)."""
        return self.model_copy(update={"sections": {**self.sections, section.KEY: section}})


def load_cluster_spec(path: Path | None, overrides: Mapping[str, object] | None = None) -> ClusterSpec:
    """ClusterSpec from a YAML file (optional) with CLI flag values layered on top."""
    return load_spec(ClusterSpec, path, overrides)
