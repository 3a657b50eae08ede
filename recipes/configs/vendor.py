"""Vendor MLPerf submissions' config_*.sh files and the names their implementations read.

Run by hand (not by azbench, not by the tests) against local git mirrors of
mlcommons/training_results_v3.1 .. v5.1:

    python recipes/configs/vendor.py /path/to/mirrors   # <dir>/mlcommons+training_results_vX/repo

For every (recipe, implementation folder, entry config) in TABLE it copies, byte for byte, the
entry config and the shared config_*.sh files next to it (config_common*.sh, config_fp8.sh; not
the other per-scale configs nor config_mounts.sh) into recipes/configs/<recipe>/<tag>/, writes
READS.txt (every environment variable name the implementation's scripts, Python and YAML read)
and PATHS.txt (the implementation's paths, below), and records repository, commit and path in
recipes/configs/ATTRIBUTION.md. The files are Apache-2.0 (the training_results repositories'
LICENSE).

SUBMISSIONS.txt says which published system ran which vendored entry config, and where the
published tree says so: one tab-separated row per (system, config), from the submission's own
README (`<org>/benchmarks/<bench>/implementations/<system>/README-<system>.md` names
`benchmarks/<bench>/implementations/<impl>/config_X.sh`). An implementation none of whose
configs a README names counts only when its folder holds one entry config and its submitter one
system with results for the benchmark (the row says so). Vendoring stops on an entry config no
submission ran and on a folder whose own README names a config other than the one vendored:

    SYSTEM  CONFIG  EVIDENCE                         e.g. tyche_ngpu512_ngc25.09_nemo,
                                                     config_GB200_128x4x144xtp4pp8cp2_cg_fp4.sh,
                                                     NVIDIA/benchmarks/.../README-tyche_ngpu512_ngc25.09_nemo.md:7

PATHS.txt is the small manifest the rehearsal (orchestrator/runs/rehearsal.py,
tests/test_rehearsal.py) checks every job against, offline. One tab-separated row per fact,
each with the file and line it was read from:

    mount   TARGET  FILE:LINE  src=HOST[;if=GUARD]   run.sub / config_mounts.sh mounts HOST at
                                                     TARGET in the container (under the shell
                                                     `if` GUARD, when there is one)
    open    PATH    FILE:LINE  [in-image] [hydra=G/O] an absolute path literal in what runs in the
                                                     container: run_and_time.sh, the config_*.sh
                                                     files vendored here, conf/**/*.yaml, the
                                                     top-level *.py (string literals, f-strings
                                                     with {} for their fields); in-image: under a
                                                     Dockerfile COPY destination and in the tree;
                                                     hydra=G/O: read only when Hydra selects option
                                                     O of config group G (conf/G/O.yaml)
    hydra   G/O     FILE:LINE                        a defaults list selects option O of group G
    image   DEST    Dockerfile:LINE  COPY SRC         the implementation's files are in the image
    base    IMAGE   Dockerfile:LINE                  the image a FROM starts from (ARG default resolved)
    launch  mpi|remap-root|container-env  FILE:LINE  VALUE   the flags of run.sub's timed job step
    expect  KEY     FILE:LINE  REL BYTES              expected-mounts*.csv: a file the implementation
                                                     expects under the mount KEY names, and its size
    mkdir   HOST    run.sub:LINE [container=PATH][;if=GUARD]  a folder run.sub creates (mkdir -p)
                                                     before its timed job step; container=: where
                                                     the job sees it, through a mount whose source
                                                     holds it (unconditional, or under the same guard)

Scripts that prepare data (scripts/, data_scripts/, utility/, preprocessing/, public-scripts/)
are not scanned for `open`: `prepare` runs them (recipes/*.yaml steps), the job does not. Paths
under /dev /proc /sys /tmp /usr /etc /bin /sbin /lib* /opt /var /run are the container's own.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# recipe -> [(round, implementation folder, [entry configs])]
TABLE: dict[str, list[tuple[str, str, list[str]]]] = {
    "llama31_405b": [
        ("v5.0", "NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n64_ngc25.01_nemo",
         ["config_DGXH100_64x8x288xtp8pp8cp2.sh"]),
        ("v5.0", "NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n256_ngc25.01_nemo",
         ["config_DGXH100_256x8x72xtp8pp8cp2.sh"]),
        ("v5.0", "NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n1024_ngc25.01_nemo",
         ["config_DGXH100_1024x8x24xtp8pp8cp2.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/tyche_ngpu512_ngc25.09_nemo",
         ["config_GB200_128x4x144xtp4pp8cp2_cg_fp4.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu2560_ngc25.09_nemo",
         ["config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu5120_ngc25.09_nemo",
         ["config_GB200_1280x4x16xtp4pp8cp2_cg_fp4.sh"]),
        # GB300 (theia): no recipe scale runs it; vendored for the precision its results ran at
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/theia_ngpu512_ngc25.09_nemo",
         ["config_GB300_128x4x72xtp2pp8cp2_cg_fp4.sh"]),
    ],
    "llama31_8b": [
        ("v5.1", "NVIDIA/benchmarks/llama31_8b/implementations/nemo",
         ["config_GB200_2x4x2xtp1pp1cp1_8b_fp4.sh", "config_GB200_18x4x1xtp1pp1cp2_8b.sh",
          "config_GB200_128x4x1xtp2pp1cp4_8b.sh",
          # the theia (GB300) systems' configs: for the precision their results ran at
          "config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh", "config_GB300_18x4x1xtp1pp1cp2_8b.sh",
          "config_GB300_128x4x1xtp2pp1cp4_8b.sh"]),
    ],
    "llama2_70b_lora": [
        ("v4.1", "NVIDIA/benchmarks/llama2_70b_lora/implementations/eos_ngc24.09_nemo",
         ["config_DGXH100_1x8x4xtp4pp1cp1.sh"]),
        ("v4.1", "NVIDIA/benchmarks/llama2_70b_lora/implementations/eos_n8_ngc24.09_nemo",
         ["config_DGXH100_8x8x1xtp4pp1cp2.sh"]),
        ("v4.1", "NVIDIA/benchmarks/llama2_70b_lora/implementations/h200_ngc24.09_nemo",
         ["config_DGXH200_1x8x2xtp1pp1cp2.sh"]),
        ("v4.1", "Azure/benchmarks/llama2_70b_lora/implementations/nemo",
         ["configs/config_DGXH200_64x8x2xtp4pp1cp2.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama2_70b_lora/implementations/nemo",
         ["config_GB200_2x4x2xtp1pp1cp2_fp4.sh", "config_GB200_18x4x1xtp1pp1cp8.sh",
          # tyche_ngpu512 and the theia (GB300) systems: for the precision their results ran at
          "config_GB200_128x4x1xtp1pp1cp8.sh", "config_GB300_2x4x1xtp1pp1cp1_fp4.sh",
          "config_GB300_18x4x1xtp1pp1cp8.sh", "config_GB300_128x4x1xtp1pp1cp8.sh"]),
    ],
    "gpt3": [
        ("v4.1", "NVIDIA/benchmarks/gpt3/implementations/eos_n64_ngc24.09_nemo",
         ["config_DGXH100_64x8x128x4x8_mbs2.sh"]),
        ("v3.1", "Azure+NVIDIA/benchmarks/gpt3/implementations/pytorch",
         ["config_DGXH100_1344x8x8x4x8_mbs1.sh"]),
    ],
    "dlrm_dcnv2": [
        ("v4.1", "NVIDIA/benchmarks/dlrm_dcnv2/implementations/eos_ngc24.04_merlin_hugectr",
         ["config_DGXH100_1x8x6912.sh"]),
        ("v4.1", "NVIDIA/benchmarks/dlrm_dcnv2/implementations/eos_n8_ngc24.06_merlin_hugectr",
         ["config_DGXH100_8x8x2112.sh"]),
        ("v4.1", "NVIDIA/benchmarks/dlrm_dcnv2/implementations/h200_ngc24.04_merlin_hugectr",
         ["config_DGXH200_1x8x6912.sh"]),
        ("v5.1", "NVIDIA/benchmarks/dlrm_dcnv2/implementations/hugectr",
         ["config_GB200_2x4x6912.sh", "config_GB200_16x4x2112.sh"]),
    ],
    "retinanet": [
        ("v4.1", "NVIDIA/benchmarks/ssd/implementations/eos_ngc24.09_pytorch",
         ["config_DGXH100_001x08x032.sh"]),
        ("v4.1", "NVIDIA/benchmarks/ssd/implementations/eos_n8_ngc24.09_pytorch",
         ["config_DGXH100_008x08x004.sh"]),
        ("v4.1", "NVIDIA/benchmarks/ssd/implementations/h200_ngc24.04_pytorch",
         ["config_DGXH100_001x08x032.sh"]),
        ("v5.1", "NVIDIA/benchmarks/retinanet/implementations/tyche_ngpu8_ngc25.04_pytorch",
         ["config_GB200_002x04x032.sh"]),
        ("v5.1", "NVIDIA/benchmarks/retinanet/implementations/tyche_ngpu72_ngc25.04_pytorch",
         ["config_GB200_018x04x004.sh"]),
    ],
    "rgat": [
        ("v4.1", "NVIDIA/benchmarks/gnn/implementations/eos_ngc24.09_dgl", ["config_DGXH100_1x8x2048.sh"]),
        ("v4.1", "NVIDIA/benchmarks/gnn/implementations/eos_n8_ngc24.09_dgl", ["config_DGXH100_8x8x1024.sh"]),
        ("v4.1", "NVIDIA/benchmarks/gnn/implementations/h200_ngc24.04_dgl", ["config_DGXH200_1x8x2048.sh"]),
        ("v5.1", "NVIDIA/benchmarks/rgat/implementations/tyche_ngpu8_ngc25.03_dgl", ["config_GB200_2x4x4096.sh"]),
        ("v5.1", "NVIDIA/benchmarks/rgat/implementations/tyche_ngpu72_ngc25.03_dgl", ["config_GB200_18x4x1024.sh"]),
    ],
    "flux1": [
        ("v5.1", "NVIDIA/benchmarks/flux1/implementations/tyche_ngpu16_ngc25.09_nemo", ["config_GB200_04x04x32.sh"]),
        ("v5.1", "NVIDIA/benchmarks/flux1/implementations/tyche_ngpu72_ngc25.09_nemo", ["config_GB200_18x04x32.sh"]),
        ("v5.1", "NVIDIA/benchmarks/flux1/implementations/tyche_ngpu512_ngc25.09_nemo",
         ["config_GB200_128x04x16xtp4.sh"]),
    ],
}
SHARED = re.compile(r"config_(common[^/]*|fp8)\.sh$")
# How implementations read the environment: shell ${X} / $X, Python os.environ / getenv, Hydra/OmegaConf ${oc.env:X}.
READS = [re.compile(p) for p in (
    r"\$\{?([A-Za-z_][A-Za-z0-9_]*)",
    r"environ(?:\.get)?\s*[\[(]\s*[\"']([A-Za-z_][A-Za-z0-9_]*)",
    r"getenv\s*\(\s*[\"']([A-Za-z_][A-Za-z0-9_]*)",
    r"oc\.env\s*:\s*([A-Za-z_][A-Za-z0-9_]*)",
    r"env_var\s*\(\s*[\"']([A-Za-z_][A-Za-z0-9_]*)",
)]
TEXT = (".sh", ".sub", ".py", ".yaml", ".yml", ".bash")
# Folders of data-preparation scripts: `prepare` runs them, the timed job does not.
PREP_DIRS = ("scripts/", "data_scripts/", "utility/", "preprocessing/", "public-scripts/")
SYSTEM_ROOTS = ("dev", "proc", "sys", "tmp", "usr", "etc", "bin", "sbin", "lib", "lib64", "opt", "var",
                "run")
_ABS = re.compile(r"""(?:(?<=[\s"'=:,(\[])|^)(/[A-Za-z0-9_.@+-][A-Za-z0-9_.${}@+/-]*)""")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def main(mirrors: Path) -> None:
    rows = []
    for recipe, entries in TABLE.items():
        for round_, impl, configs in entries:
            repo = mirrors / f"mlcommons+training_results_{round_}" / "repo"
            commit = git(repo, "rev-parse", "HEAD").strip()
            org = impl.split("/")[0]
            tag = f"{round_}_{org}_{impl.rsplit('/', 1)[-1]}"
            out = HERE / recipe / tag
            out.mkdir(parents=True, exist_ok=True)
            files = git(repo, "ls-tree", "-r", "--name-only", "HEAD", impl + "/").splitlines()
            wanted = [f for f in files if SHARED.search(f)] + [f"{impl}/{c}" for c in configs]
            for path in wanted:
                (out / Path(path).name).write_bytes(
                    subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True,
                                   capture_output=True).stdout)
                rows.append((f"{recipe}/{tag}/{Path(path).name}", f"mlcommons/training_results_{round_}",
                             commit, path))
            names: set[str] = set()
            for path in files:
                if path.endswith(TEXT) and "/config_mounts" not in path:
                    text = git(repo, "show", f"HEAD:{path}")
                    for pattern in READS:
                        names.update(pattern.findall(text))
            (out / "PATHS.txt").write_text(
                f"# Paths mlcommons/training_results_{round_} @ {commit} {impl}/ mounts and opens,\n"
                f"# extracted by recipes/configs/vendor.py (format: its docstring). Apache-2.0, see\n"
                f"# ../../ATTRIBUTION.md.\n"
                + "".join("\t".join(row) + "\n" for row in paths_manifest(repo, impl, files, wanted)))
            rows.append((f"{recipe}/{tag}/PATHS.txt", f"mlcommons/training_results_{round_}", commit,
                         f"{impl}/ (paths extracted)"))
            (out / "READS.txt").write_text(
                f"# Environment variable names read by mlcommons/training_results_{round_} @ {commit}\n"
                f"# {impl}/ (*.sh, run.sub, *.py, *.yaml: $X / ${{X}}, os.environ, getenv, oc.env:X),\n"
                f"# extracted by recipes/configs/vendor.py. Apache-2.0, see ../../ATTRIBUTION.md.\n"
                + "".join(f"{n}\n" for n in sorted(names)))
            rows.append((f"{recipe}/{tag}/READS.txt", f"mlcommons/training_results_{round_}", commit,
                         f"{impl}/ (names extracted)"))
            (out / "SUBMISSIONS.txt").write_text(
                f"# Which mlcommons/training_results_{round_} @ {commit} system ran which config of\n"
                f"# {impl}/, and where the published tree says so (SYSTEM<TAB>CONFIG<TAB>EVIDENCE),\n"
                f"# extracted by recipes/configs/vendor.py. Apache-2.0, see ../../ATTRIBUTION.md.\n"
                + "".join("\t".join(row) + "\n" for row in submissions(repo, impl, configs)))
            rows.append((f"{recipe}/{tag}/SUBMISSIONS.txt", f"mlcommons/training_results_{round_}", commit,
                         f"{impl}/ (systems' READMEs read)"))
    lines = ["# Attribution",
             "",
             "Files under this folder are copied unchanged (READS.txt: extracted) from the MLCommons",
             "training results repositories, licensed under the Apache License 2.0",
             "(https://www.apache.org/licenses/LICENSE-2.0); copyright their submitters (NVIDIA, Azure,",
             "Azure+NVIDIA). Regenerate with `python recipes/configs/vendor.py MIRRORS`.",
             "",
             "| file | repository | commit | path |",
             "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in sorted(set(rows))]
    (HERE / "ATTRIBUTION.md").write_text("\n".join(lines) + "\n")


ENTRY = re.compile(r"^(?:configs/)?config_[A-Za-z0-9]+_[0-9]+x[^/]*\.sh$")  # config_<SYSTEM>_<N>x<G>...sh


def submissions(repo: Path, impl: str, configs: list[str]) -> list[tuple[str, str, str]]:
    """SUBMISSIONS.txt rows for the vendored entry `configs` of `impl` (module docstring);
    SystemExit when the published tree does not back the vendoring."""
    org, _, bench, _, name = impl.split("/")[:5]
    tree = git(repo, "ls-tree", "-r", "--name-only", "HEAD", f"{org}/benchmarks/{bench}/implementations/")
    named: dict[str, list[tuple[str, str]]] = {}  # config -> [(system, README:LINE)]
    own: list[str] = []  # configs of this folder that its own README names
    ref = re.compile(rf"benchmarks/{re.escape(bench)}/implementations/{re.escape(name)}/"
                     r"((?:configs/)?config_[A-Za-z0-9_.x-]+\.sh)")
    for readme in tree.splitlines():
        m = re.fullmatch(rf"{re.escape(org)}/benchmarks/{re.escape(bench)}/implementations/([^/]+)/README-(\1)\.md",
                         readme)
        if not m:
            continue
        for n, line in enumerate(git(repo, "show", f"HEAD:{readme}").splitlines(), 1):
            for config in ref.findall(line):
                named.setdefault(config, []).append((m.group(1), f"{readme}:{n}"))
                if m.group(1) == name:
                    own.append(config)
    stray = sorted(set(own) - set(configs))
    if stray:
        raise SystemExit(f"{impl}: its README-{name}.md names {stray[0]}, not the vendored "
                         f"{', '.join(configs)}: vendor the config the submission ran")
    rows = [(system, Path(config).name, where) for config in configs
            for system, where in dict.fromkeys(named.get(config, []))]
    if any(named.get(c) for c in configs):
        missing = [c for c in configs if not named.get(c)]
        if missing:
            raise SystemExit(f"{impl}/{missing[0]}: no submission's README names it")
        return rows
    entries = [f for f in git(repo, "ls-tree", "-r", "--name-only", "HEAD", impl + "/").splitlines()
               if ENTRY.match(f[len(impl) + 1:])]
    systems = sorted({p.split("/")[2] for p in git(repo, "ls-tree", "-r", "--name-only", "HEAD",
                                                   f"{org}/results/").splitlines()
                      if p.split("/")[3:4] == [bench]})
    if len(configs) == 1 and [e[len(impl) + 1:] for e in entries] == configs and len(systems) == 1:
        return [(systems[0], Path(configs[0]).name, f"{impl}/{configs[0]} is the folder's only entry config and "
                                         f"{systems[0]} {org}'s only system with {bench} results "
                                         "(no README names a config of the folder)")]
    raise SystemExit(f"{impl}: no submission's README names {', '.join(configs)}")


def paths_manifest(repo: Path, impl: str, files: list[str], vendored: list[str]) -> list[tuple[str, ...]]:
    """PATHS.txt rows for the implementation folder `impl` (module docstring)."""
    texts = {f[len(impl) + 1:]: git(repo, "show", f"HEAD:{f}") for f in files
             if f.endswith(TEXT) or f.endswith((".csv", "Dockerfile"))}
    rows: list[tuple[str, ...]] = []
    for name in ("run.sub", "config_mounts.sh"):
        if name in texts:
            rows += _mounts(name, texts[name])
    if "run.sub" in texts:
        rows += _srun_facts(texts["run.sub"])
        rows += _mkdirs(texts["run.sub"], [r for r in rows if r[0] == "mount"])
    images = _image_roots(texts.get("Dockerfile", ""))
    rows += [("image", dest, f"Dockerfile:{line}", f"COPY {src}") for dest, src, line in images]
    rows += _base_images(texts.get("Dockerfile", ""))
    tree = {f[len(impl) + 1:] for f in files}
    tree |= {p.rsplit("/", k)[0] for p in list(tree) for k in range(1, p.count("/") + 1)}
    own = {Path(v).name for v in vendored}
    for rel, text in sorted(texts.items()):
        if not _runs_in_job(rel, own):
            continue
        found = _py_paths(text) if rel.endswith(".py") else _text_paths(text)
        option = re.fullmatch(r"conf/([^/]+)/([^/]+)\.ya?ml", rel)
        for line, path in found:
            detail = ["in-image"] if _in_image(path, images, tree) else []
            detail += [f"hydra={option.group(1)}/{option.group(2)}"] if option else []
            rows.append(("open", path, f"{rel}:{line}", " ".join(detail)))
        if re.fullmatch(r"conf/[^/]+\.ya?ml", rel):
            rows += _hydra_defaults(rel, text)
    for rel, text in sorted(texts.items()):
        if re.fullmatch(r"expected-mounts[^/]*\.csv", rel):
            for n, line in enumerate(text.splitlines(), 1):
                cells = line.split(",")
                if len(cells) == 5 and cells[1] == "file":
                    rows.append(("expect", cells[0], f"{rel}:{n}", f"{cells[2]} {cells[4]}"))
    return list(dict.fromkeys(rows))


def _hydra_defaults(rel: str, text: str) -> list[tuple[str, ...]]:
    """`hydra` rows: the group options a primary config's defaults list selects by name."""
    rows, inside = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r"defaults\s*:", line):
            inside = True
            continue
        if inside and not line.startswith((" ", "-", "\t")) and line.strip():
            inside = False
        m = re.match(r"\s*-\s*(?:optional\s+)?(?:override\s+)?([A-Za-z0-9_]+)(?:@[^:]+)?\s*:\s*([A-Za-z0-9_.-]+)\s*$",
                     line) if inside else None
        if m:
            rows.append(("hydra", f"{m.group(1)}/{m.group(2)}", f"{rel}:{n}", ""))
    return rows


def _runs_in_job(rel: str, vendored: set[str]) -> bool:
    """Whether `rel` is part of what runs inside the timed job (not a preparation script)."""
    if rel.startswith(PREP_DIRS) or rel.endswith((".csv", "Dockerfile", ".sub")) or rel == "config_mounts.sh":
        return False
    name = rel.rsplit("/", 1)[-1]
    if name.startswith("config_") and name.endswith(".sh"):
        return name in vendored  # only the configs a job sources
    if rel.endswith(".py"):
        return "/" not in rel  # the entry scripts and their top-level modules
    return rel == "run_and_time.sh" or rel.startswith("conf/") or rel.startswith("configs/")


def _clean(path: str) -> str:
    """A path token without the closing braces, quotes and punctuation around it."""
    path = path.rstrip(",;)\"'")
    while path.endswith("}") and path.count("{") < path.count("}"):
        path = path[:-1]
    return path.rstrip(",;)\"'") or path


def _system(path: str) -> bool:
    first = path.split("/")[1] if path.count("/") else ""
    return first in SYSTEM_ROOTS or not first or first.startswith(("$", "{"))


def _text_paths(text: str) -> list[tuple[int, str]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        for m in _ABS.findall(code):
            path = _clean(m)
            if not path.startswith("//") and not _system(path):
                out.append((n, path))
    return out


def _py_paths(text: str) -> list[tuple[int, str]]:
    """Absolute paths in a module's string literals; an f-string's fields become {}. A literal
    that only continues another value (an f-string's tail, the right side of `+`) is not one."""
    tree = ast.parse(text)
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    parts |= {id(node.right) for node in ast.walk(tree) if isinstance(node, ast.BinOp)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            value = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                            for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            value = node.value
        else:
            continue
        if re.fullmatch(r"/[A-Za-z0-9_.@+{}-][A-Za-z0-9_.@+{}/-]*", value) and not _system(value):
            out.append((node.lineno, value))
    return sorted(set(out))


def _guarded(text: str) -> list[tuple[int, str, str]]:
    """(line number, code, the shell `if` guard it sits under) for each line that is not a comment."""
    out, guards = [], []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.strip()
        if code.startswith("#"):
            continue
        if re.match(r"if\b", code):
            guards.append(re.sub(r";\s*then\s*$", "", code[2:].strip()))
        elif re.match(r"elif\b", code) and guards:
            guards[-1] = re.sub(r";\s*then\s*$", "", code[4:].strip())
        elif code == "else" and guards:
            guards[-1] = f"! {{ {guards[-1]}; }}"
        elif code == "fi" and guards:
            guards.pop()
        out.append((n, code, " && ".join(f"{{ {g}; }}" if len(guards) > 1 else g for g in guards)))
    return out


def _mounts(name: str, text: str) -> list[tuple[str, ...]]:
    """`mount` rows: every HOST:TARGET of a _cont_mounts / MOUNTS assignment, with its guard."""
    defaults = dict(re.findall(r'^\s*:\s*"\$\{([A-Z_][A-Z0-9_]*):=([^}"]*)\}"', text, re.M))
    rows = []
    for n, code, guard in _guarded(text):
        if not re.search(r"(_cont_mounts\+?=|MOUNTS:?=)", code):
            continue
        value = re.split(r"(?:_cont_mounts\+?=|MOUNTS:?=)", code, maxsplit=1)[1].strip('"} ')
        for piece in re.split(r",(?![^{]*\})", value):
            m = re.fullmatch(r"(.+?):(/[^:,]*|\$\{[A-Z_][A-Z0-9_]*\})(?::r[ow])?", piece.strip('"'))
            if not m or m.group(1) in ("${_cont_mounts}", "$_cont_mounts"):
                continue
            target = m.group(2)
            var = re.fullmatch(r"\$\{([A-Z_][A-Z0-9_]*)\}", target)
            target = defaults.get(var.group(1), target) if var else target
            if not target.startswith("/"):
                continue
            rows.append(("mount", target, f"{name}:{n}", f"src={m.group(1)}" + (f";if={guard}" if guard else "")))
    return rows


def _mkdirs(text: str, mounts: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """`mkdir` rows: each folder a `mkdir -p` of run.sub creates before its timed job step (on
    the batch host, in an srun or a bash -c), with where the container sees it, if it does."""
    timed = next((int(r[2].split(":")[1]) for r in _srun_facts(text)), None)
    rows = []
    for n, code, guard in _guarded(text):
        if timed is not None and n >= timed:
            break
        for m in re.finditer(r"\bmkdir\s+-p\s+((?:\"[^\"]*\"|[^\s;)&|\"]+)(?:\s+(?:\"[^\"]*\"|[^\s;)&|\"]+))*)",
                             code):
            for arg in re.findall(r'"([^"]*)"|(\S+)', m.group(1)):
                host = _braced(arg[0] or arg[1])
                inside = _inside(host, guard, mounts)
                detail = (f"container={inside}" if inside else "") + (f";if={guard}" if guard else "")
                rows.append(("mkdir", host, f"run.sub:{n}", detail))
    return rows


def _braced(path: str) -> str:
    """A shell path with each $NAME written ${NAME}, so the same folder reads the same way."""
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", r"${\1}", path)


def _inside(host: str, guard: str, mounts: list[tuple[str, ...]]) -> str:
    """Where the container sees host folder `host`: the longest mount source that holds it,
    among the mounts that are unconditional or under the same guard ("" when none does)."""
    best = ("", "")
    for _, target, _, detail in mounts:
        src, _, cond = detail.partition(";if=")
        src = _braced(src[len("src="):])
        if cond and cond != guard:
            continue
        if (host == src or host.startswith(src.rstrip("/") + "/")) and len(src) > len(best[0]):
            best = (src, target + host[len(src):])
    return best[1]


def _srun_facts(text: str) -> list[tuple[str, ...]]:
    """The timed srun's MPI type, pyxis remap-root and forced --container-env names."""
    lines = text.splitlines()
    joined, start = "", 0
    for n, line in enumerate(lines, 1):
        if line.strip().startswith("#"):
            continue
        if not joined:
            start = n
        joined += " " + line.strip().rstrip("\\")
        if line.rstrip().endswith("\\"):
            continue
        if re.search(r"\bsrun\b", joined) and "run_and_time.sh" in joined:
            break
        joined = ""
    if not joined:
        return []
    where = f"run.sub:{start}"
    rows: list[tuple[str, ...]] = []
    mpi = re.search(r"--mpi=\"?(\$\{SLURM_MPI_TYPE:-(\w+)\}|\w+)", joined)
    if mpi:
        rows.append(("launch", "mpi", where, mpi.group(2) or mpi.group(1)))
    defaults = re.search(r"^PYXIS_DEFAULTS=\((.*)\)", text, re.M)
    remap = "--container-remap-root" in joined or (
        "PYXIS_DEFAULTS" in joined and defaults is not None and "--container-remap-root" in defaults.group(1))
    rows.append(("launch", "remap-root", where, "yes" if remap else "no"))
    env = re.search(r"--container-env=([A-Za-z0-9_,]+)", joined)
    if env:
        rows.append(("launch", "container-env", where, env.group(1)))
    return rows


def _base_images(dockerfile: str) -> list[tuple[str, ...]]:
    """`base` rows: the image each FROM starts from (an ARG default resolved)."""
    args = dict(re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)", dockerfile, re.M))
    rows, stages = [], set()
    for n, line in enumerate(dockerfile.splitlines(), 1):
        m = re.match(r"FROM\s+(\S+)(?:\s+[Aa][Ss]\s+(\S+))?", line)
        if m:
            image = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: args.get(v.group(1), v.group(0)), m.group(1))
            if image not in stages:  # a later stage that starts from an earlier one is not a base
                rows.append(("base", image, f"Dockerfile:{n}", ""))
            stages |= {m.group(2)} if m.group(2) else set()
    return rows


def _image_roots(dockerfile: str) -> list[tuple[str, str, int]]:
    """(destination, source, line) of each `COPY . DEST` / `COPY DIR DEST` of the build context."""
    workdir, out = "/", []
    for n, line in enumerate(dockerfile.splitlines(), 1):
        words = line.split()
        if words[:1] == ["WORKDIR"] and len(words) > 1:
            workdir = words[1] if words[1].startswith("/") else f"{workdir.rstrip('/')}/{words[1]}"
        if words[:1] in (["COPY"], ["ADD"]) and len(words) == 3 and not words[1].startswith("--"):
            src, dest = words[1], words[2]
            dest = dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}".replace("/./", "/")
            if dest.endswith("/."):
                dest = dest[:-2]
            if src in (".", "./") or src.endswith("/"):
                out.append((dest.rstrip("/") or "/", src, n))
    return out


def _in_image(path: str, images: list[tuple[str, str, int]], tree: set[str]) -> bool:
    """Whether `path` is a file or folder of the tree that a COPY put into the image."""
    for dest, src, _ in images:
        if path == dest or path.startswith(dest + "/"):
            rel = path[len(dest):].strip("/")
            base = "" if src in (".", "./") else src.rstrip("/")
            if not rel or f"{base}/{rel}".strip("/") in tree:
                return True
    return False


if __name__ == "__main__":
    main(Path(sys.argv[1]))
