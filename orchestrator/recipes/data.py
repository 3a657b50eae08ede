"""A recipe's data items: what `azbench prepare` stages for an MLPerf recipe and where its job
mounts it.

Each item (recipes/*.yaml mlperf.data) is one dataset, checkpoint or tokenizer under the
cluster's data root: fetched through MLCommons' R2 path or its own command, or licence-gated
(Gated: the user places it, the staging job verifies it), then made ready by the
implementation's README steps inside its container (ContainerStep). The item knows its host
paths, its checksum and size lists, the files it holds once staged and the container paths it
is mounted at; runs/launch.py turns items into the staging job and the run's mounts.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from orchestrator.models import Frozen

_REL_PATH = re.compile(r"[A-Za-z0-9._-][A-Za-z0-9._/-]*")


class Gated(Frozen):
    """A licence-gated item azbench cannot fetch: the user gets it and places it, the staging job
    verifies `files` (and the item's checksums, where published) before it marks it staged."""

    licence: str  # whose terms, e.g. "Llama 3.1 Community License"
    get: str  # where and how to obtain it, exactly
    files: list[str] = Field(min_length=1)  # relative paths that must exist under the item's folder


class ContainerStep(Frozen):
    """A preparation step the implementation's README runs inside its container once the data is
    downloaded (energon conversion, FP16 preprocessing, ...). The staging job runs it with the
    built squashfs (a pyxis job step with `--container-image`), the host folders in `mounts` mounted, in the
    container's workdir, as `bash -c RUN`; on success it writes `<item>/.azbench-step-NAME` holding
    a key over RUN, the mounts, the sha256 of every `inputs` file (the item's R2 md5 lists always
    count) and the previous step's key, so a rerun skips a step whose key is unchanged."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    run: str = Field(min_length=1)
    # Host folder -> container path: "." is the item's folder, a relative path is under it,
    # "{data_root}/..." is under the data root (another item's folder). Default: {".": item.mount}.
    mounts: dict[str, str] = Field(default_factory=dict)
    # Small files (same forms as mounts' keys) whose content pins the step's input.
    inputs: list[str] = Field(default_factory=list)
    # repository@commit path of the README/script the step is taken from.
    source: str = Field(min_length=1)
    # The implementation folders (ContainerBuild.path) the step is for (their READMEs give it,
    # their containers have its scripts); empty: every implementation of the recipe. With another
    # container the job skips it, or reports it missing when the item is made by its steps alone.
    implementations: list[str] = Field(default_factory=list)


def _host(path: str, dest: str, data_root: str) -> str:
    """A step's host path ("." / relative to the item / "{data_root}/...") made absolute."""
    if path.startswith("{data_root}/"):
        return data_root.rstrip("/") + path[len("{data_root}"):]
    return dest if path == "." else f"{dest}/{path}"


def _check_step_path(item: str, what: str, path: str) -> None:
    rel = path[len("{data_root}/"):] if path.startswith("{data_root}/") else path
    if path != "." and (not _REL_PATH.fullmatch(rel) or ".." in rel.split("/")):
        raise ValueError(f"data item '{item}': step {what} {path!r} is not '.', a plain relative "
                         "path or {data_root}/PATH")


class DataItem(Frozen):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    kind: str = Field(pattern="^(dataset|checkpoint|tokenizer)$")
    path: str
    # Where the run mounts it (None: staged only for prepare's steps; `also` mounts what they made).
    mount: str | None = Field(None, pattern=r"^/[A-Za-z0-9._/-]*$")
    var: str | None = Field(None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    size_gb: float | None = None
    # Exactly one way to stage it: a command run in the item's folder, an MLCommons R2 metadata
    # URI (fetched and md5-checked by the staging job's mlc_r2), or a licence-gated item to verify.
    stage: str = ""
    # MLCommons R2 downloads: sub-folder of the item ("." for the item's own) -> metadata URI,
    # each run as the README's `mlc-r2-downloader.sh -d SUBFOLDER URI`.
    r2: dict[str, str] = Field(default_factory=dict)
    # After the r2 downloads, in the item's folder: the reference's own layout fix-ups (cited in
    # `source`); written to be rerun safely.
    after: str = ""
    gated: Gated | None = None
    # In the implementation's container, after the downloads and the container build, in order.
    # An item with steps and no other way to stage is made by its steps alone.
    steps: list[ContainerStep] = Field(default_factory=list)
    optional: bool = False  # the implementation can run without it: prepare reports, run does not refuse
    # Where else the job mounts (part of) the item: a path under the item ("." for the item
    # itself, "{data_root}/..." for a folder its steps made) -> container path, where the
    # implementation opens it at a second place.
    also: dict[str, str] = Field(default_factory=dict)
    # The implementation folders (ContainerBuild.path) whose runs use this item (their READMEs
    # stage it this way); empty: every implementation of the recipe.
    implementations: list[str] = Field(default_factory=list)
    # What the item holds once staged (paths under its folder, shell globs allowed): the staging
    # job checks each exists before it reports the recipe staged, and the rehearsal
    # (runs/rehearsal.py) checks every path the implementation opens inside the mount against it.
    files: list[str] = Field(default_factory=list)
    source: str = ""
    # Relative path under the item's folder -> sha256: the staging job checks them before it marks
    # the item staged (an item without them is marked once its command succeeds).
    checksums: dict[str, str] = Field(default_factory=dict)
    # Relative path -> bytes, as the implementation's expected-mounts*.csv lists them: a gated
    # item's files are checked against them (and against the md5 list an MLCommons R2 download
    # leaves beside them, where there is one) before it is marked staged.
    sizes: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_checksums(self) -> DataItem:
        ways = [w for w, v in (("stage", self.stage), ("r2", self.r2), ("gated", self.gated)) if v]
        if len(ways) > 1 or (not ways and not self.steps):
            raise ValueError(f"data item '{self.name}': give exactly one of stage, r2, gated "
                             f"or only steps (got {', '.join(ways) or 'none'})")
        if self.gated and self.steps:
            raise ValueError(f"data item '{self.name}': a gated item is placed by hand, not made by steps")
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"data item '{self.name}': step names repeat: {names}")
        for step in self.steps:
            for host, inside in step.mounts.items():
                _check_step_path(self.name, "mount", host)
                if not re.fullmatch(r"/[A-Za-z0-9._/-]*", inside) or ".." in inside.split("/"):
                    raise ValueError(f"data item '{self.name}': step mount target {inside!r} is not an absolute plain path")
            for rel in step.inputs:
                _check_step_path(self.name, "input", rel)
        if (self.r2 or self.gated) and not self.source:
            raise ValueError(f"data item '{self.name}': an r2 or gated item needs its source "
                             "(repository, commit, README path)")
        if self.after and not self.r2:
            raise ValueError(f"data item '{self.name}': after runs only after r2 downloads")
        for sub, uri in self.r2.items():
            if sub != "." and (not _REL_PATH.fullmatch(sub) or ".." in sub.split("/")):
                raise ValueError(f"data item '{self.name}': r2 folder {sub!r} is not a plain relative path")
            if not re.fullmatch(r"https://[A-Za-z0-9.-]+/[A-Za-z0-9._/-]+\.uri", uri):
                raise ValueError(f"data item '{self.name}': r2 {uri!r} is not an https URL of a .uri metadata file")
        for given in [*self.files, *(p for p in self.also if p != ".")]:
            rel = given[len("{data_root}/"):] if given.startswith("{data_root}/") else given
            if not re.fullmatch(r"[A-Za-z0-9._*?=+\[\]-][A-Za-z0-9._*?=+\[\]/-]*", rel) or ".." in rel.split("/"):
                raise ValueError(f"data item '{self.name}': {given!r} is not a plain relative path "
                                 "or {data_root}/PATH")
        for inside in self.also.values():
            if not re.fullmatch(r"/[A-Za-z0-9._/-]*", inside) or ".." in inside.split("/"):
                raise ValueError(f"data item '{self.name}': also-mount {inside!r} is not an absolute plain path")
        for rel in self.gated.files if self.gated else []:
            if not _REL_PATH.fullmatch(rel) or ".." in rel.split("/"):
                raise ValueError(f"data item '{self.name}': gated file {rel!r} is not a plain relative path")
        for rel, digest in self.checksums.items():
            if not _REL_PATH.fullmatch(rel) or ".." in rel.split("/"):
                raise ValueError(f"data item '{self.name}': checksum path {rel!r} is not a plain relative path")
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ValueError(f"data item '{self.name}': checksum for {rel} is not a sha256 hex digest")
        return self

    def instructions(self, data_root: str) -> str:
        """One line: what to do when this gated item is missing on the cluster."""
        if self.gated is None:
            return ""
        dest = self.host_path(data_root)
        get = self.gated.get.replace("{data_root}", data_root.rstrip("/"))
        return (f"{self.name} ({self.kind}, {self.gated.licence}): {get}; place it on "
                f"the cluster's shared filesystem under {dest} so that "
                f"{', '.join(self.gated.files)} exist there, then rerun prepare")

    def size_list(self) -> str:
        """The item's sizes as "BYTES  PATH" lines ("" when it has none)."""
        return "".join(f"{n}  {rel}\n" for rel, n in sorted(self.sizes.items()))

    def sha256_list(self) -> str:
        """The items's checksums in `sha256sum -c` format ("" when it has none)."""
        return "".join(f"{digest}  {rel}\n" for rel, digest in sorted(self.checksums.items()))

    def host_path(self, data_root: str) -> str:
        return self.path.replace("{data_root}", data_root.rstrip("/"))

    @property
    def provides(self) -> list[str]:
        """What the item holds once staged: its `files`, else a gated item's required files."""
        return list(self.files) or (list(self.gated.files) if self.gated else [])

    def provided_paths(self, data_root: str) -> list[str]:
        """`provides` as absolute paths (globs kept) under `data_root`."""
        return [_host(p, self.host_path(data_root), data_root) for p in self.provides]

    def also_paths(self, data_root: str) -> dict[str, str]:
        """`also` with absolute host paths: host path -> container path."""
        dest = self.host_path(data_root)
        return {_host(p, dest, data_root): inside for p, inside in self.also.items()}

    def used_by(self, implementation: str | None) -> bool:
        """Whether a run from `implementation`'s container uses the item (None: any)."""
        return implementation is None or not self.implementations or implementation in self.implementations

    def steps_for(self, implementation: str | None) -> list[ContainerStep]:
        """The steps a run from `implementation`'s container needs (None: all)."""
        return [s for s in self.steps if implementation is None or not s.implementations
                or implementation in s.implementations]

    def step_marker(self, step: ContainerStep, data_root: str) -> str:
        return f"{self.host_path(data_root)}/.azbench-step-{step.name}"

    def step_mounts(self, step: ContainerStep, data_root: str) -> str:
        """pyxis --container-mounts for `step`: HOST:PATH pairs joined by commas."""
        dest = self.host_path(data_root)
        mounts = step.mounts or ({".": self.mount} if self.mount else {})
        return ",".join(f"{_host(h, dest, data_root)}:{c}" for h, c in mounts.items())

    def step_inputs(self, step: ContainerStep, data_root: str) -> list[str]:
        """The files whose sha256 key `step`'s marker: the md5 list of each R2 download (as the
        staging job's mlc_r2 saves it: SUBFOLDER/NAME.md5), then the step's own inputs."""
        dest = self.host_path(data_root)
        lists = [_host(f"{sub}/{uri.rsplit('/', 1)[1][:-len('.uri')]}.md5" if sub != "." else
                       f"{uri.rsplit('/', 1)[1][:-len('.uri')]}.md5", dest, data_root)
                 for sub, uri in self.r2.items()]
        return [*lists, *(_host(p, dest, data_root) for p in step.inputs)]
