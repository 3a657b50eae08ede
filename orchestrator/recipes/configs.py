"""The submissions' own config_*.sh files, vendored under recipes/configs/, and what they set.

Each MLPerf recipe scale names the NVIDIA/Azure config_<system>.sh it comes from (ScaleConfig.config,
a path under recipes/configs/<recipe>/). Those files are copied unchanged from the
mlcommons/training_results_vX repositories (recipes/configs/ATTRIBUTION.md, Apache-2.0) by
recipes/configs/vendor.py, together with READS.txt: every environment variable name the
implementation's scripts read.

The effective environment of a config is what bash exports after sourcing it (the configs use
conditionals, arithmetic and `source $(dirname ${BASH_SOURCE[0]})/config_common.sh`, so they are run,
not parsed): `bash --norc` in an empty environment plus the topology values the configs read
(DGXNGPU, DGXNNODES, NEXP), with `source` wrapped to record each file it reads. Each variable is
attributed to the last sourced file that assigns it.
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.models import Frozen
from orchestrator.paths import recipes_dir

SHARED = re.compile(r"^config_(common[A-Za-z0-9._-]*|fp8)\.sh$")
# What a config may read before it is sourced; everything else comes from the config itself.
PRE_ENV = ("DGXNNODES", "DGXNGPU", "NEXP")
_MARK = "AZBENCH_SOURCED "
# fd 3 is the real stderr while the configs' own output goes to /dev/null.
_TRACE = ('exec 3>&2\n'
          f'source() {{ printf "{_MARK}%s\\n" "$1" >&3; builtin source "$@"; }}\n'
          f'.() {{ printf "{_MARK}%s\\n" "$1" >&3; builtin source "$@"; }}\n')


class ConfigEnv(Frozen):
    """The variables a sourced config exports, each with the vendored file that set it."""

    entry: str
    files: list[str]
    values: dict[str, str]
    sources: dict[str, str]


def config_flag(value: str | None, default: bool = False) -> bool:
    """A config's boolean switch as the submissions' scripts spell it ("True", "1", "yes", in any
    case); unset or empty: `default`."""
    text = (value or "").strip().lower()
    return default if not text else text in ("1", "true", "yes")


def configs_dir() -> Path:
    return recipes_dir() / "configs"


def entry_path(recipe: str, config: str) -> Path:
    path = configs_dir() / recipe / config
    if not path.is_file():
        raise ConfigError(f"recipe '{recipe}' names config '{config}' but recipes/configs/{recipe}/"
                          f"{config} does not exist")
    return path


def bundle(recipe: str, config: str) -> dict[str, str]:
    """File name -> text of what a launch must carry: the entry config and the shared ones beside it."""
    entry = entry_path(recipe, config)
    names = sorted(p.name for p in entry.parent.glob("config_*.sh") if SHARED.match(p.name))
    return {name: (entry.parent / name).read_text() for name in [*names, entry.name]
            if name in names or name == entry.name}


def reads(recipe: str, config: str) -> frozenset[str]:
    """The environment names the config's implementation reads (its READS.txt)."""
    path = entry_path(recipe, config).parent / "READS.txt"
    if not path.is_file():
        raise ConfigError(f"recipes/configs/{recipe}/{Path(config).parent}/READS.txt is missing")
    return frozenset(line.strip() for line in path.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))


def effective_env(recipe: str, config: str, pre: dict[str, str]) -> ConfigEnv:
    """What sourcing `config` exports (the PRE_ENV values of `pre` set first)."""
    return _effective(recipe, config, tuple(sorted((k, pre[k]) for k in PRE_ENV if k in pre)))


@lru_cache(maxsize=None)
def _effective(recipe: str, config: str, pre: tuple[tuple[str, str], ...]) -> ConfigEnv:
    entry = entry_path(recipe, config)
    base_env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C", **dict(pre)}
    script = (_TRACE + 'source "$1" >/dev/null 2>&1 </dev/null || exit 9\n'
              'unset -f source .\nenv -0\n')
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "azbench", str(entry)],
                          env=base_env, capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                          cwd=entry.parent)
    sourced = [Path(line[len(_MARK):]) for line in done.stderr.decode(errors="replace").splitlines()
               if line.startswith(_MARK)]
    if done.returncode != 0:
        raise ConfigError(f"recipes/configs/{recipe}/{config} failed when sourced "
                          f"(bash exit {done.returncode})")
    skip = _bash_own_names() - set(dict(pre))
    values = {k: v for k, v in _parse_env(done.stdout).items() if k not in skip}
    files = [_rel(p if p.is_absolute() else entry.parent / p) for p in sourced]
    # Sourcing order is entry first; its own assignments follow its `source` lines, so the entry
    # counts as the last writer.
    files = [*files[1:], *files[:1]]
    texts = {f: (configs_dir() / f).read_text() for f in dict.fromkeys(files)}
    sources: dict[str, str] = {}
    for name, value in values.items():
        setter = re.compile(rf"(?:^|[\s;]){re.escape(name)}=(\"[^\"]*\"|'[^']*'|[^\s;#]*)"
                            rf"|\$\{{{re.escape(name)}:=([^}}]*)\}}", re.M)
        hits = [(f, [a or b for a, b in setter.findall(texts[f])]) for f in files]
        hits = [(f, [v.strip("\"'") for v in vals]) for f, vals in hits if vals]
        # Prefer the last file (in sourcing order) whose literal assignment is the final value: an
        # entry config sources config_common.sh first and then overrides it.
        exact = [f for f, vals in hits if value in vals]
        chosen = exact[-1] if exact else (hits[-1][0] if hits else None)
        sources[name] = f"recipes/configs/{chosen}" if chosen else "azbench (set before sourcing)"
    return ConfigEnv(entry=f"recipes/configs/{recipe}/{config}",
                     files=[f"recipes/configs/{f}" for f in dict.fromkeys(files)],
                     values=values, sources=sources)


@lru_cache(maxsize=1)
def _bash_own_names() -> frozenset[str]:
    """What bash itself exports in the sandbox (PWD, SHLVL, _ ...), so it is not blamed on a config."""
    bare = subprocess.run(["bash", "--noprofile", "--norc", "-c", "env -0"], capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"},
                          timeout=30).stdout
    return frozenset(_parse_env(bare))


def _parse_env(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw.decode(errors="replace").split("\0"):
        if "=" in item:
            key, value = item.split("=", 1)
            out[key] = value
    return out


def _rel(path: Path) -> str:
    return str(path.resolve().relative_to(configs_dir().resolve()))


class Implementation(Frozen):
    """Where a vendored config's implementation lives: its Dockerfile and build context are the
    folder `path` of `repo` at `commit` (recipes/configs/ATTRIBUTION.md, the READS.txt row)."""

    repo: str
    commit: str
    path: str


def implementation(recipe: str, config: str) -> Implementation:
    """The implementation folder the vendored `config` (a path under recipes/configs/<recipe>/)
    was copied from, read from ATTRIBUTION.md."""
    folder = f"{recipe}/{Path(config).parent.as_posix()}/READS.txt"
    attribution = configs_dir() / "ATTRIBUTION.md"
    for line in attribution.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] == folder:
            path = cells[3].split(" ", 1)[0].rstrip("/")
            if not re.fullmatch(r"[0-9a-f]{40}", cells[2]) or not re.fullmatch(r"[A-Za-z0-9._/+-]+", path):
                break
            return Implementation(repo=cells[1], commit=cells[2], path=path)
    raise ConfigError(f"recipes/configs/ATTRIBUTION.md has no implementation row for {folder}")


class PathFact(Frozen):
    """One row of an implementation's PATHS.txt (recipes/configs/vendor.py's docstring): a
    container mount its run.sub / config_mounts.sh makes (`mount`, with the shell guard it sits
    under), a path its job's scripts, configs and defaults open (`open`), where the image holds
    its code (`image`), a flag of its timed job step (`launch`), a file its expected-mounts*.csv lists
    (`expect`), a Hydra config group's default option (`hydra`) or a host folder run.sub
    creates before its timed job step (`mkdir`, with where the container sees it)."""

    kind: str
    path: str
    where: str  # FILE:LINE in the implementation folder
    detail: str = ""

    @property
    def file(self) -> str:
        return self.where.rsplit(":", 1)[0]

    @property
    def guard(self) -> str:
        """The shell condition a mount sits under ("" when it is unconditional)."""
        return self.detail.split(";if=", 1)[1] if ";if=" in self.detail else ""

    @property
    def container(self) -> str:
        """Where the container sees a `mkdir` row's folder ("" when no mount shows it)."""
        head = self.detail.split(";if=", 1)[0]
        return head[len("container="):] if head.startswith("container=") else ""


def paths_manifest(recipe: str, config: str) -> list[PathFact]:
    """The PATHS.txt facts of the implementation a vendored `config` comes from."""
    path = entry_path(recipe, config).parent / "PATHS.txt"
    if not path.is_file():
        raise ConfigError(f"recipes/configs/{recipe}/{Path(config).parent}/PATHS.txt is missing",
                          hint="regenerate it with recipes/configs/vendor.py")
    return _manifest(path)


@lru_cache(maxsize=None)
def _manifest(path: Path) -> list[PathFact]:
    facts = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) < 3:
            raise ConfigError(f"{path}:{n}: not KIND<TAB>PATH<TAB>FILE:LINE[<TAB>DETAIL]")
        facts.append(PathFact(kind=cells[0], path=cells[1], where=cells[2],
                              detail=cells[3] if len(cells) > 3 else ""))
    return facts


def made_dirs(recipe: str, config: str) -> list[PathFact]:
    """The folders the implementation's run.sub creates before its timed job step that the
    container sees (`mkdir` rows with a container path), from PATHS.txt."""
    return [f for f in paths_manifest(recipe, config) if f.kind == "mkdir" and f.container]


def launch_flags(recipe: str, config: str) -> dict[str, PathFact]:
    """The flags of the implementation's timed job step by name (mpi, remap-root,
    container-env), from PATHS.txt."""
    return {f.path: f for f in paths_manifest(recipe, config) if f.kind == "launch"}


class Submission(Frozen):
    """A published system that ran a vendored entry config (SUBMISSIONS.txt, written by
    recipes/configs/vendor.py from the systems' own READMEs)."""

    round: str
    submitter: str
    system: str
    config: str  # "<impl folder>/<file>", as recipes.configs' functions take it
    evidence: str  # the README line that names the config (or why none needs to)

    @property
    def label(self) -> str:
        """'v5.1/NVIDIA/tyche_ngpu512_ngc25.09_nemo', as the report labels the system."""
        return f"{self.round}/{self.submitter}/{self.system}"


def submissions(recipe: str) -> list[Submission]:
    """Every (system, vendored config) pair of `recipe`'s implementation folders."""
    out = []
    for path in sorted((configs_dir() / recipe).glob("*/SUBMISSIONS.txt")):
        folder = path.parent.name
        round_name, submitter = folder.split("_", 2)[:2]
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            cells = line.split("\t")
            if len(cells) != 3:
                raise ConfigError(f"{path}:{n}: not SYSTEM<TAB>CONFIG<TAB>EVIDENCE",
                                  hint="regenerate it with recipes/configs/vendor.py")
            out.append(Submission(round=round_name, submitter=submitter, system=cells[0],
                                  config=f"{folder}/{cells[1]}", evidence=cells[2]))
    return out
