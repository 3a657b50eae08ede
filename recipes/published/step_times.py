"""Build recipes/published/step_times.csv: the measured step time of every published LLM scale
whose parallel layout can be read, with that layout (the input of orchestrator/explain).

Run by hand (not by azbench, not by the tests) against local git mirrors of
mlcommons/training_results_v3.0 .. v5.1 (every round with one of the four benchmarks):

    python recipes/published/step_times.py /path/to/mirrors   # <dir>/mlcommons+training_results_vX/repo

A scale is one (round, submitter, system, benchmark). For each one of gpt3, llama2_70b_lora,
llama31_8b and llama31_405b it reads:
- every result log `<org>/results/<system>/<bench>/result_*.txt` with azbench's own MLLOG parser
  (orchestrator.results.mllog): each log's median per-step time (train_step_time; per-block
  averages where that is all a log has), then the median over the logs; the log's
  global_batch_size and max_sequence_length;
- the system JSON `<org>/systems/<system>.json`: nodes, accelerators per node, accelerator;
- the config: every `config_*.sh` entry of `<org>/benchmarks/<bench>/implementations/*/` is sourced
  by bash (as recipes/configs.py does) with DGXNNODES and DGXNGPU from its file name; the ones whose
  nodes x GPUs is the system's and whose global batch (GBS, else MINIBS x DP) is the log's are
  candidates; a candidate from an implementation folder named after the system wins, else the
  candidates must agree on the layout (TP, PP, CP, VP, MBS, precision) or the scale is skipped.
No log, code or configuration file is copied: a row holds numbers read from them and the path of
the config (recipes/published/ATTRIBUTION.md).
"""

from __future__ import annotations

import csv
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from orchestrator.recipes.configs import config_flag  # noqa: E402
from orchestrator.results.mllog import parse_lines  # noqa: E402

ROUNDS = ("v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1")
BENCHES = ("gpt3", "llama2_70b_lora", "llama31_8b", "llama31_405b")
OUT = ROOT / "recipes" / "published" / "step_times.csv"
FIELDS = ("round", "submitter", "system", "benchmark", "accelerator", "nodes", "gpus_per_node",
          "gpus", "tp", "pp", "cp", "vp", "ep", "mbs", "gbs", "seq_len", "precision",
          "tp_overlap", "tp_pp_dp_mapping", "fp8_dpa", "step_s", "logs", "steps", "step_source", "config",
          "commit")
# Sequence lengths where a log does not say (the benchmarks' reference definitions).
SEQ = {"gpt3": 2048, "llama2_70b_lora": 8192, "llama31_8b": 8192, "llama31_405b": 8192}
_SHAPE = re.compile(r"_(\d+)x(\d+)x")
_NAMES = {"tp": ("TENSOR_MODEL_PARALLEL", "TP"), "pp": ("PIPELINE_MODEL_PARALLEL", "PP"),
          "cp": ("CONTEXT_PARALLEL", "CP"), "vp": ("INTERLEAVED_PIPELINE", "VP"),
          "mbs": ("MICRO_BATCH_SIZE", "MBS"), "gbs": ("GBS", "GLOBAL_BATCH_SIZE"),
          "minibs": ("MINIBS",)}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True,
                          check=True).stdout


def fallback_steps(text: str, gbs: int | None, seq: int | None) -> list[float]:
    """Step times from logs without per-step times: tracked_stats throughput (samples/s per block,
    NVIDIA v4.0 LoRA) -> GBS/throughput; a block's epoch_count in tokens (NVIDIA v4.0 GPT-3)
    -> block seconds / (epoch_count / (GBS x seq))."""
    import json
    out, start = [], None
    for line in text.splitlines():
        at = line.find(":::MLLOG ")
        if at < 0:
            continue
        try:
            event = json.loads(line[at + 9:])
        except ValueError:
            continue
        key, meta = event.get("key"), event.get("metadata") or {}
        value = event.get("value")
        if key == "tracked_stats" and isinstance(value, dict) and "throughput" in value and gbs:
            if float(value["throughput"]) > 0:
                out.append(gbs / float(value["throughput"]))
        elif key == "block_start":
            start = event.get("time_ms"), meta.get("epoch_count")
        elif key == "block_stop" and start and start[1] and gbs and seq and start[0]:
            steps = float(start[1]) / (gbs * seq)
            if steps >= 1:
                out.append((event["time_ms"] - start[0]) / 1000.0 / steps)
            start = None
    return out


MISSING = "AZBENCH_MISSING_SOURCES"


def source(folder: Path, name: str, nodes: str, gpus: str) -> dict[str, str]:
    """The environment `name` leaves when sourced; a helper it sources that the submission does
    not have is listed under MISSING (bash's `source` of a missing file fails and carries on, so
    without this a missing config_common.sh silently drops its FP8=True)."""
    script = ('source() { if [ -f "$1" ]; then builtin source "$@"; '
              'else AZBENCH_MISSING_SOURCES="${AZBENCH_MISSING_SOURCES} ${1##*/}"; fi; }\n'
              'builtin source "$1" >/dev/null 2>&1 </dev/null || exit 9\n'
              'export AZBENCH_MISSING_SOURCES\nenv -0\n')
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "x", name], cwd=folder,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C",
                               "DGXNNODES": nodes, "DGXNGPU": gpus, "NEXP": "1"},
                          capture_output=True, timeout=30)
    if done.returncode:
        return {}
    return dict(item.split("=", 1) for item in done.stdout.decode(errors="replace").split("\0")
                if "=" in item)


def pick(env: dict[str, str], key: str, defaults: dict[str, str] | None = None) -> int | None:
    """The config's value of `key` (any of its names); where the config leaves every name unset,
    the implementation's own default for it (`hydra_defaults`)."""
    for layer in (env, defaults or {}):
        for name in _NAMES[key]:
            value = layer.get(name, "").strip()
            if re.fullmatch(r"\d+", value):
                return int(value)
    return None


_ENV_DEFAULT = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*),\s*([^{}]*?)\s*\}")


def hydra_defaults(repo: Path, commit: str, folder: str) -> dict[str, str]:
    """`${oc.env:NAME,default}` in the implementation's Hydra configs (its *.yaml): what NeMo runs
    with when the config leaves NAME unset. NVIDIA's v3.1 GPT-3 configs, and smc's v4.0 ones, set no
    INTERLEAVED_PIPELINE; conf/custom.yaml's `virtual_pipeline_model_parallel_size:
    ${oc.decode:${oc.env:INTERLEAVED_PIPELINE,12}}` makes it 12 (it read as 1, no interleaving).
    A name two files default differently is left out."""
    found: dict[str, set[str]] = {}
    listed = git(repo, "ls-tree", "-r", "--name-only", commit, folder + "/").splitlines()
    for path in listed:
        if path.endswith((".yaml", ".yml")):
            for m in _ENV_DEFAULT.finditer(git(repo, "show", f"{commit}:{path}")):
                found.setdefault(m.group(1), set()).add(m.group(2))
    return {name: next(iter(values)) for name, values in found.items() if len(values) == 1}


def precision(env: dict[str, str]) -> str:
    if config_flag(env.get("FP4")):
        return "fp4"
    if config_flag(env.get("FP8")) or config_flag(env.get("FP8_HYBRID")):
        return "fp8"
    return "bf16"


def layouts(repo: Path, commit: str, org: str, bench: str, tmp: Path) -> list[dict[str, object]]:
    """Every entry config of the submitter's implementations of `bench`, sourced."""
    prefix = f"{org}/benchmarks/{bench}/implementations/"
    files = [f for f in git(repo, "ls-tree", "-r", "--name-only", commit, prefix).splitlines()
             if re.search(r"/config_[^/]*\.sh$", f)]
    out = []
    impl = {f: "/".join(f[len(prefix):].split("/")[:1]) for f in files}
    for name in sorted(set(impl.values())):
        folder = prefix + name
        local = tmp / folder
        for item in files:
            if impl[item] == name:
                target = tmp / item
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(subprocess.run(
                    ["git", f"--git-dir={repo}", "show", f"{commit}:{item}"], capture_output=True,
                    check=True).stdout)
        if not local.is_dir():
            continue
        _helpers_beside(local)
        defaults = hydra_defaults(repo, commit, folder)
        for f in sorted(local.glob("config_*.sh")):
            shape = _SHAPE.search(f.name)
            if shape is None or f.name.startswith(("config_common", "config_mounts", "config_fp8")):
                continue
            env = source(local, f.name, shape.group(1), shape.group(2))
            if not env:
                continue
            nodes, per = int(env.get("DGXNNODES", shape.group(1)) or 0), int(env.get("DGXNGPU", shape.group(2)) or 0)
            tp, pp, cp = (pick(env, k, defaults) or 1 for k in ("tp", "pp", "cp"))
            gpus = nodes * per
            if gpus % (tp * pp * cp):
                continue
            dp = gpus // (tp * pp * cp)
            minibs = pick(env, "minibs")
            gbs = pick(env, "gbs") or (minibs * dp if minibs else None)
            vp = pick(env, "vp", defaults)
            out.append({"folder": folder.rsplit("/", 1)[1], "config": f"{folder}/{f.name}",
                        "gpus": gpus, "tp": tp, "pp": pp, "cp": cp, "vp": vp if vp and pp > 1 else 1,
                        "mbs": pick(env, "mbs", defaults) or 1, "gbs": gbs, "precision": _precision_read(env),
                        "tp_overlap": env.get("TP_COMM_OVERLAP", "") or "",
                        "tp_pp_dp_mapping": env.get("TP_PP_DP_MAPPING", "") or "",
                        "fp8_dpa": env.get("FP8_DPA", "") or ""})
    return out


def _precision_read(env: dict[str, str]) -> str:
    """The config's GEMM precision, or "" (not known) when it reads BF16 but sources a helper the
    submission lacks: the helper may set FP8 (University of Florida's v5.1 configs source a
    config_common.sh their folder does not have)."""
    read = precision(env)
    return "" if read == "bf16" and env.get(MISSING, "").split() else read


def _helpers_beside(local: Path) -> None:
    """Copy the shared helpers (config_common.sh, ...) of a `configs/` subfolder beside the entry
    configs when the top has none: NVIDIA's v4.1 LoRA entries `source $(dirname $0)/config_common.sh`
    while the submission keeps it in configs/ (its README sources configs/config_*.sh), and a
    missing helper would silently drop FP8=True (the row would read bf16)."""
    for helper in sorted(local.glob("configs/config_*.sh")):
        top = local / helper.name
        if helper.name.startswith(("config_common", "config_mounts", "config_fp8")) and not top.exists():
            top.write_bytes(helper.read_bytes())


def readme_text(repo: Path, commit: str, org: str, bench: str, system: str) -> str:
    folder = f"{org}/benchmarks/{bench}/implementations/{system}/"
    listed = git(repo, "ls-tree", "--name-only", commit, folder).splitlines()
    names = [f for f in listed if f.rsplit("/", 1)[-1] == f"README-{system}.md"] or \
        [f for f in listed if f.rsplit("/", 1)[-1].lower().startswith("readme")]
    return "\n".join(git(repo, "show", f"{commit}:{f}") for f in names)


def main(mirrors: Path) -> None:
    rows = []
    for round_name in ROUNDS:
        repo = mirrors / f"mlcommons+training_results_{round_name}" / "repo"
        if not repo.is_dir():
            print(f"skip {round_name}: no mirror at {repo}", file=sys.stderr)
            continue
        commit = git(repo, "rev-parse", "HEAD").strip()
        tree = git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
        logs: dict[tuple[str, str, str], list[str]] = {}
        for path in tree:
            parts = path.split("/")
            if len(parts) == 5 and parts[1] == "results" and parts[3] in BENCHES and parts[4].startswith("result_"):
                logs.setdefault((parts[0], parts[2], parts[3]), []).append(path)
        cache: dict[tuple[str, str], list[dict[str, object]]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for (org, system, bench), paths in sorted(logs.items()):
                row = scale(repo, commit, round_name, org, system, bench, paths, cache, Path(tmp))
                if row:
                    rows.append(row)
    with OUT.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} scales -> {OUT}", file=sys.stderr)


def scale(repo: Path, commit: str, round_name: str, org: str, system: str, bench: str,
          paths: list[str], cache: dict[tuple[str, str], list[dict[str, object]]],
          tmp: Path) -> dict[str, object] | None:
    import json
    try:
        sysjson = json.loads(git(repo, "show", f"{commit}:{org}/systems/{system}.json"))
    except (subprocess.CalledProcessError, ValueError):
        print(f"skip {round_name} {org} {system} {bench}: no system JSON", file=sys.stderr)
        return None
    nodes, per = int(sysjson.get("number_of_nodes") or 0), int(sysjson.get("accelerators_per_node") or 0)
    medians, gbs, seq, steps, source_kind = [], None, None, 0, ""
    for path in sorted(paths):
        try:
            text = git(repo, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            continue  # the mirror lacks the blob
        summary = parse_lines(text.splitlines())
        times = [s.seconds for s in summary.step_times[1:] or summary.step_times]
        kind: str = summary.step_time_source or ""
        if kind not in ("tracked_stats", "tracked_block_avg", "block_derived") or not times:
            times = fallback_steps(text, summary.global_batch_size, summary.max_sequence_length
                                   or SEQ.get(bench))
            times, kind = times[1:] or times, "throughput_or_tokens"
        if not times:
            continue
        medians.append(statistics.median(times))
        gbs, seq = summary.global_batch_size or gbs, summary.max_sequence_length or seq
        steps += len(times)
        source_kind = kind
    why = ""
    if not medians:
        why = "no step times in its logs"
    elif gbs is None:
        why = "no global_batch_size"
    if why:
        print(f"skip {round_name} {org} {system} {bench}: {why}", file=sys.stderr)
        return None
    if (org, bench) not in cache:
        cache[(org, bench)] = layouts(repo, commit, org, bench, tmp / org / bench)
    found = [c for c in cache[(org, bench)] if c["gpus"] == nodes * per and c["gbs"] == gbs]
    own = [c for c in found if c["folder"] == system]
    chosen = own or found
    if len(chosen) > 1:  # the system's README names the config it ran (as recipes/configs/vendor.py reads it)
        readme = readme_text(repo, commit, org, bench, system)
        named = [c for c in chosen if str(c["config"]).rsplit("/", 1)[1] in readme]
        chosen = named or chosen
    keys = ("tp", "pp", "cp", "vp", "mbs", "precision")
    if not chosen or len({tuple(c[k] for k in keys) for c in chosen}) != 1:
        print(f"skip {round_name} {org} {system} {bench}: {len(chosen)} configs match "
              f"{nodes}x{per} GBS {gbs}", file=sys.stderr)
        return None
    c = chosen[0]
    return {"round": round_name, "submitter": org, "system": system, "benchmark": bench,
            "accelerator": sysjson.get("accelerator_model_name", ""), "nodes": nodes,
            "gpus_per_node": per, "gpus": nodes * per, "tp": c["tp"], "pp": c["pp"], "cp": c["cp"],
            "vp": c["vp"], "ep": 1, "mbs": c["mbs"], "gbs": gbs, "seq_len": seq or SEQ[bench],
            "precision": c["precision"], "tp_overlap": c["tp_overlap"],
            "tp_pp_dp_mapping": c["tp_pp_dp_mapping"], "fp8_dpa": c["fp8_dpa"], "step_s": round(statistics.median(medians), 5),
            "logs": len(medians), "steps": steps, "step_source": source_kind,
            "config": c["config"], "commit": commit}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: step_times.py MIRRORS_DIR")
    main(Path(sys.argv[1]))
