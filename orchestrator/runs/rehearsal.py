"""The rehearsal of an MLPerf job against its implementation's own files, offline.

A scale's job is rendered as `run` submits it (launch.container_run); then every absolute path
its implementation's files name (recipes/configs/<recipe>/<impl>/PATHS.txt, extracted from the
published tree by recipes/configs/vendor.py: mounts of run.sub / config_mounts.sh, paths the
entry scripts, sourced configs, Hydra configs and Python defaults open) and every absolute path
value of the job's environment must resolve:

- inside a container mount of the job: a staged data item (and then to a file the item holds
  once `prepare` staged it: DataItem.files), /results, /checkpoints, a scratch folder, the
  network's host mounts;
- inside the image: under a Dockerfile COPY destination, present in the implementation's tree;
- or be waived in the recipe (mlperf.waive) with the implementation's own line that says why.

Every folder the implementation's run.sub creates before its timed job step (`mkdir -p`) that
the container sees must be a mount of the job or a folder the job creates before launch too
(ContainerRun.make_dirs: LoRA's YAML builds its index in /results/data_index/{train,val}).

A published mount counts where its shell guard holds with the job's environment (bash evaluates
the guard as run.sub would); a path in a Hydra group option counts where a defaults list selects
that option (or none is named). Pure but for the one bash call that evaluates the guards.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess

from orchestrator.errors import ConfigError
from orchestrator.models import ContainerRun, Frozen
from orchestrator.paths import DEFAULT_DATA_ROOT
from orchestrator.recipes.catalog import Recipe, get_recipe, list_recipes, resolve
from orchestrator.recipes.configs import PathFact, paths_manifest
from orchestrator.runs.launch import container_run

# The job's own mounts (slurm/container.py): the attempt folder and the checkpoint folder.
JOB_MOUNTS = {"/results": "the attempt's folder", "/checkpoints": "the run's checkpoint folder"}
_SYSTEM = ("/dev", "/proc", "/sys", "/tmp", "/usr", "/etc", "/bin", "/sbin", "/lib", "/opt",
           "/var", "/run")


class PathCheck(Frozen):
    """One path the implementation (or the job's environment) names, and how it resolves."""

    kind: str  # mount | open | env | mkdir
    path: str  # as written
    expanded: str  # with the job's environment ('*' where a value is unknown)
    where: str  # recipes/configs/<recipe>/<impl>/FILE:LINE, or "env NAME [source]"
    resolved: str = ""  # how it resolves ("" when it does not)
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


class Rehearsal(Frozen):
    """Every path check of one recipe x SKU x scale."""

    recipe: str
    sku: str
    nodes: int
    implementation: str
    checks: list[PathCheck]

    @property
    def unresolved(self) -> list[PathCheck]:
        return [c for c in self.checks if not c.ok]

    @property
    def waived(self) -> list[PathCheck]:
        """The checks that pass only by a waiver (mlperf.waive), not by a mount, the image or staged data."""
        return [c for c in self.checks if c.ok and c.resolved.startswith("waived:")]


def rehearse(recipe_name: str, sku: str, nodes: int, data_root: str = DEFAULT_DATA_ROOT) -> Rehearsal:
    """The rehearsal of `recipe_name` on `nodes` x `sku` (a scale with a vendored config)."""
    recipe = get_recipe(recipe_name)
    resolved = resolve(recipe, sku, nodes)
    rel = resolved.vendored
    if recipe.mlperf is None or not rel:
        raise ConfigError(f"{recipe_name} on {nodes} x {sku} has no vendored submission config")
    folder = f"recipes/configs/{recipe.name}/{rel.rsplit('/', 1)[0]}"
    facts = paths_manifest(recipe.name, rel)
    job = container_run(recipe, recipe.mlperf, resolved, data_root)
    env = {**resolved.config_env, **resolved.env}
    mounts = _job_mounts(recipe, job)
    sourced = {f.rsplit("/", 1)[-1] for f in resolved.config_files}
    chosen = {f.path for f in facts if f.kind == "hydra"}
    groups = {p.split("/", 1)[0] for p in chosen}
    live = _guards_hold([f.guard for f in facts if f.kind in ("mount", "mkdir") and f.guard], env)
    checks: list[PathCheck] = []
    for fact in facts:
        where = f"{folder}/{fact.where}"
        if fact.kind == "mount" and (not fact.guard or live.get(fact.guard)):
            checks.append(_check_mount(fact, where, env, mounts))
        elif fact.kind == "mkdir" and (not fact.guard or live.get(fact.guard)):
            checks.append(_check_mkdir(fact, where, env, mounts, job, recipe))
        elif fact.kind == "open" and _counts(fact, sourced, chosen, groups):
            checks.append(_check_open(fact.path, "open", where, "in-image" in fact.detail.split(),
                                      env, mounts, recipe, data_root))
    in_image = {f.path for f in facts if f.kind == "open" and "in-image" in f.detail.split()}
    for name, value in sorted(env.items()):
        if _is_path(value) and name not in resolved.network_env:
            checks.append(_check_open(value, "env", f"env {name} [{resolved.env_sources.get(name, 'azbench')}]",
                                      value in in_image, env, mounts, recipe, data_root))
    return Rehearsal(recipe=recipe.name, sku=resolved.sku_short, nodes=nodes,
                     implementation=folder, checks=checks)


def rehearse_all() -> list[Rehearsal]:
    """The rehearsal of every recipe x SKU x listed scale with a vendored config."""
    out = []
    for recipe in list_recipes():
        for sku, scales in (recipe.mlperf.scales.items() if recipe.mlperf else []):
            out += [rehearse(recipe.name, sku, s.nodes) for s in scales if s.config]
    return out


# -- helpers -----------------------------------------------------------------------------------

class _Mount(Frozen):
    target: str  # in the container
    label: str
    item: str | None = None  # the data item's name
    host: str = ""  # the host folder mounted (data items)


def _job_mounts(recipe: Recipe, job: ContainerRun) -> list[_Mount]:
    out = [_Mount(target=t, label=why) for t, why in JOB_MOUNTS.items()]
    for d in job.data:
        if d.mount:
            out.append(_Mount(target=d.mount, label=f"data item {d.name}", item=d.name, host=d.path))
        out += [_Mount(target=inside, label=f"data item {d.name}", item=d.name, host=host)
                for host, inside in d.also.items()]
    scratch = recipe.mlperf.scratch if recipe.mlperf else {}
    out += [_Mount(target=p, label=f"scratch: {scratch.get(p, '')}") for p in job.scratch]
    out += [_Mount(target=m.split(":")[1], label="network host mount") for m in job.network_mounts]
    return sorted(out, key=lambda m: -len(m.target))


def _counts(fact: PathFact, sourced: set[str], chosen: set[str], groups: set[str]) -> bool:
    """Whether an `open` row is part of this job: a config it sources, a Hydra option it selects."""
    name = fact.file.rsplit("/", 1)[-1]
    if name.startswith("config_") and name.endswith(".sh") and name not in sourced:
        return False
    option = next((d[len("hydra="):] for d in fact.detail.split() if d.startswith("hydra=")), None)
    return option is None or option in chosen or option.split("/", 1)[0] not in groups


def _expand(path: str, env: dict[str, str]) -> str:
    """`path` with ${VAR}, $VAR, ${VAR:-x} from `env`; '*' for unknown values and {} fields."""
    def one(m: re.Match[str]) -> str:
        value = env.get(m.group(1) or m.group(3))
        return value or m.group(2) or "*"
    out = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, path)
    out = re.sub(r"\$\{[^}]*$", "*", out)  # cut short where the extraction stopped
    return out.replace("{}", "*")


def _under(path: str, target: str) -> str | None:
    """The part of `path` below mount `target` ("" for the target itself), None when outside."""
    target = target.rstrip("/") or "/"
    if path.rstrip("/") == target:
        return ""
    if path.startswith(target + "/"):
        return path[len(target) + 1:].rstrip("/")
    return None


def _check_mount(fact: PathFact, where: str, env: dict[str, str], mounts: list[_Mount]) -> PathCheck:
    target = _expand(fact.path, env)
    for m in mounts:
        rest = _under(target, m.target)
        if rest is not None:
            how = f"job mount {m.target} ({m.label})" + (f", {rest} inside it" if rest else "")
            return PathCheck(kind="mount", path=fact.path, expanded=target, where=where, resolved=how)
    return PathCheck(kind="mount", path=fact.path, expanded=target, where=where,
                     problem=f"the implementation mounts {fact.detail.split(';')[0][4:]} at {target}; "
                             "the job mounts nothing there")


def _check_mkdir(fact: PathFact, where: str, env: dict[str, str], mounts: list[_Mount],
                 job: ContainerRun, recipe: Recipe) -> PathCheck:
    """A folder run.sub creates before launch: host side only, a mount of the job (created
    with it), a folder the job creates before launch (make_dirs), or waived."""
    inside = fact.container
    if not inside:
        return PathCheck(kind="mkdir", path=fact.path, expanded=_expand(fact.path, env), where=where,
                         resolved="host side only: no mount of the implementation shows it to "
                                  "the container")
    expanded = _expand(inside, env).rstrip("/") or "/"
    tag = where.split("/")[3] if where.startswith("recipes/configs/") else ""
    waive = recipe.mlperf.waive if recipe.mlperf else {}
    why = waive.get(f"{tag}:{fact.path}") or waive.get(fact.path)
    if why:
        return PathCheck(kind="mkdir", path=fact.path, expanded=expanded, where=where, resolved=f"waived: {why}")
    mount = next((m for m in mounts if m.target.rstrip("/") == expanded), None)
    if mount is not None:
        return PathCheck(kind="mkdir", path=fact.path, expanded=expanded, where=where,
                         resolved=f"job mount {mount.target} ({mount.label})")
    if expanded in job.make_dirs:
        return PathCheck(kind="mkdir", path=fact.path, expanded=expanded, where=where,
                         resolved="the job creates it before launch (its batch script's mkdir -p)")
    return PathCheck(kind="mkdir", path=fact.path, expanded=expanded, where=where,
                     problem=f"the implementation creates {expanded} in the container before launch "
                             f"({fact.path}); the job does not")


def _check_open(path: str, kind: str, where: str, in_image: bool, env: dict[str, str],
                mounts: list[_Mount], recipe: Recipe, data_root: str) -> PathCheck:
    expanded = _expand(path, env)
    spec = recipe.mlperf
    items = {d.name: d for d in (spec.data if spec else [])}
    tag = where.split("/")[3] if where.startswith("recipes/configs/") else ""
    waive = spec.waive if spec else {}
    why = waive.get(f"{tag}:{path}") or waive.get(path)
    for m in mounts:
        rest = _under(expanded, m.target)
        if rest is None:
            continue
        item = items.get(m.item or "")
        if item is None or (not rest and m.host == item.host_path(data_root)):
            return PathCheck(kind=kind, path=path, expanded=expanded, where=where,
                             resolved=f"job mount {m.target} ({m.label})")
        host = f"{m.host}/{rest}" if rest else m.host
        hit = _provided(item.provided_paths(data_root), host)
        if hit:
            return PathCheck(kind=kind, path=path, expanded=expanded, where=where,
                             resolved=f"job mount {m.target} ({m.label}): {hit} once prepare staged it")
        if why:
            return PathCheck(kind=kind, path=path, expanded=expanded, where=where, resolved=f"waived: {why}")
        problem = (f"{expanded} lies in data item {item.name} (mounted at {m.target}), but {host} "
                   f"is not among what prepare stages ({', '.join(item.provides) or 'nothing declared'})")
        return PathCheck(kind=kind, path=path, expanded=expanded, where=where, problem=problem)
    if in_image:
        return PathCheck(kind=kind, path=path, expanded=expanded, where=where,
                         resolved="in the image (the implementation's tree, copied by its Dockerfile)")
    if why:
        return PathCheck(kind=kind, path=path, expanded=expanded, where=where, resolved=f"waived: {why}")
    return PathCheck(kind=kind, path=path, expanded=expanded, where=where,
                     problem=f"{expanded} is in no container mount of the job, not in the image, "
                             "and not waived")


def _provided(entries: list[str], host: str) -> str | None:
    """The entry (an absolute host path, globs allowed) that covers `host`: the same file, a
    file in that folder, or a file of the stem Megatron opens as STEM.bin/STEM.idx; else None."""
    for entry in entries:
        if fnmatch.fnmatch(entry, host) or fnmatch.fnmatch(host, entry):
            return entry
        if fnmatch.fnmatch(entry, host.rstrip("/") + "/*") or fnmatch.fnmatch(entry, host + ".*"):
            return entry
    return None


def _is_path(value: str) -> bool:
    return bool(re.fullmatch(r"/[A-Za-z0-9_.@+-][A-Za-z0-9_.@+/${}-]*", value)) and \
        not value.startswith(_SYSTEM)


def _guards_hold(guards: list[str], env: dict[str, str]) -> dict[str, bool]:
    """Each shell guard evaluated by bash with the job's environment (as run.sub would)."""
    unique = list(dict.fromkeys(guards))
    if not unique:
        return {}
    script = 'i=0; for g in "$@"; do if eval "$g" >/dev/null 2>&1; then echo "$i"; fi; i=$((i+1)); done'
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "rehearsal", *unique],
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    held = {int(n) for n in done.stdout.split() if n.isdigit()}
    return {g: i in held for i, g in enumerate(unique)}
