"""Build recipes/published/training_results.csv from the MLCommons training results trees.

Run by hand (not in CI), with the azbench virtualenv, from the repository root:

    python recipes/published/generate.py MIRRORS [--rounds v3.1 v5.0 ...] [--jobs 2]

MIRRORS holds one git directory per round, MIRRORS/mlcommons+training_results_<round>/repo
(bare clones or snapshots of github.com/mlcommons/training_results_<round>), read at HEAD.

For every results folder <org>/results/<system>/<benchmark>/ the score comes from
mlperf_logging's own result_summarizer (`_compute_strong_score_standalone`, the function its
summarize_results calls per benchmark folder): each result_*.txt passes the ruleset's compliance
checker or is dropped, the olympic mean drops the fastest and the slowest run (a dropped run
counts as the slowest; more than one dropped run, four for unet3d, means no score), and the
mean is multiplied by scaling.json's scaling_factor (1.0 when absent). The system columns are
the system JSON's fields, as the summarizer reads them.

A folder is skipped, with the reason on stderr, when a log blob is absent from the mirror (the
snapshots lack files of 4 MiB and more), the system JSON is missing or unreadable, or the
summarizer gives no score. Afterwards the official summarizer CLI
(`python -m mlperf_logging.result_summarizer FOLDER training RULESET --csv ...`) is run on a
sample of systems (--check, copies in a temp dir) and its scores are compared with the rows.
Accelerator names the catalog (orchestrator/hardware/sizes.yaml: a size's `mlperf.accelerators`,
or `no_azure_size`) does not list are reported.

It also writes recipes/published/accelerators.csv: the accelerator_model_name of every system
JSON in the trees (scored or not), which tests/test_catalog.py holds the catalog's table to.
`--accelerators-only` writes just that file (seconds: it reads the system JSONs with git, no
logs).

The output is Apache-2.0 data derived from the training_results repositories; the sources and
their commits are written to recipes/published/ATTRIBUTION.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import io
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "training_results.csv"
ACCELERATORS_OUT = HERE / "accelerators.csv"
ROUNDS = ("v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1")
COLUMNS = ("round", "org", "submitter", "division", "availability", "system", "system_name",
           "accelerator", "accelerators_per_node", "nodes", "accelerators", "host_processor",
           "framework", "benchmark", "result_files", "runs_required", "runs_dropped",
           "mean_minutes", "scaling_factor", "score_minutes", "repo", "commit")
# Systems re-scored by the official summarizer CLI after generation: round/org/system.
CHECK = ("v3.1/Azure/ND_H100_v5_pytorch", "v3.1/Azure+NVIDIA/ND_H100_v5_n1344_pytorch",
         "v4.1/Azure/ND_H200_v5_n64_nemo", "v5.0/NVIDIA/eos-dfw_n64_ngc25.01_nemo",
         "v5.1/NVIDIA/tyche_ngpu8_ngc25.04_pytorch", "v4.0/Dell/XE9680x8H100-SXM-80GB",
         "v3.0/Dell/2xXE9680x8H100-SXM-80GB")  # its resnet folder has a dropped (non-converged) run


def ruleset(round_: str) -> str:
    return round_.lstrip("v") + ".0"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def is_result(path: str) -> bool:
    parts = path.split("/")
    return (len(parts) == 5 and parts[1] == "results" and parts[4].startswith("result_")
            and parts[4].endswith(".txt"))


def wanted(path: str) -> bool:
    parts = path.split("/")
    return (is_result(path) or (len(parts) == 5 and parts[1] == "results" and parts[4] == "scaling.json")
            or (len(parts) == 3 and parts[1] == "systems" and parts[2].endswith(".json")))


def extract(repo: Path, dest: Path) -> tuple[str, set[str]]:
    """Write the result logs, scaling.json files and system JSONs at HEAD under dest.
    Returns the commit and the paths whose blobs the mirror lacks."""
    commit = git(repo, "rev-parse", "HEAD").strip()
    entries = []
    for line in git(repo, "ls-tree", "-r", "HEAD").splitlines():
        meta, path = line.split("\t", 1)
        if wanted(path):
            entries.append((meta.split()[2], path))
    missing: set[str] = set()
    proc = subprocess.Popen(["git", "--git-dir", str(repo), "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    for blob, path in entries:
        proc.stdin.write(f"{blob}\n".encode())
        proc.stdin.flush()
        header = proc.stdout.readline().decode().split()
        if header[-1] == "missing":
            missing.add(path)
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        out = dest / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    proc.stdin.close()
    proc.wait()
    return commit, missing


def score_folder(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """Score one benchmark folder with mlperf_logging's summarizer code (in a worker process).
    Its prints (dropped runs) and the compliance checker's log warnings are captured."""
    from mlperf_logging.benchmark_meta import get_result_file_counts
    from mlperf_logging.result_summarizer import result_summarizer as rs

    folder, benchmark_dir, round_, _ = task
    benchmark = rs._benchmark_alias(benchmark_dir)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            tracked, _, score, _, scaling = rs._compute_strong_score_standalone(
                benchmark, None, False, folder, "training", ruleset(round_), return_full_scores=True)
    except Exception as exc:  # noqa: BLE001 - any failure of the summarizer skips the folder
        return {"task": task, "error": f"summarizer raised {type(exc).__name__}: {exc}"}
    finally:
        root.removeHandler(handler)
    files = sorted(p for p in os.listdir(folder) if p.startswith("result_") and p.endswith(".txt"))
    dropped = len(files) - len(tracked)
    max_dropped = 4 if benchmark == "unet3d" else 1
    mean = (rs._compute_olympic_average(list(tracked.values()), dropped, max_dropped)
            if dropped <= max_dropped else None)
    return {"task": task, "benchmark": benchmark, "files": len(files), "dropped": dropped,
            "mean": mean, "scaling": float(scaling), "score": score, "log": out.getvalue(),
            "required": get_result_file_counts("training").get(benchmark, 0),
            "dropped_files": sorted(set(files) - {Path(p).name for p in tracked})}


def why(log: str, name: str) -> str:
    """The summarizer's line for a dropped file, with the first compliance warning before it."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.endswith(name) and " in " in line:
            detail = next((lines[j] for j in range(i - 1, -1, -1)
                           if any(ch.isalpha() for ch in lines[j]) and not lines[j].startswith("-")), "")
            return f"{line.split(' in ')[0]}" + (f" ({detail[:160]})" if detail else "")
    return "dropped"


def count(value: Any) -> int:
    """A system JSON count: "8", 8, or an integral float such as 1.0 (v3.1 Ailiverse)."""
    number = float(str(value).strip())
    if not number.is_integer():
        raise ValueError(f"not a whole number: {value!r}")
    return int(number)


def system_columns(desc: dict[str, Any]) -> dict[str, Any]:
    from mlperf_logging.result_summarizer import result_summarizer as rs

    def text(key: str) -> str:
        return " ".join(str(desc.get(key, "")).split())

    nodes, per_node = count(desc["number_of_nodes"]), count(desc["accelerators_per_node"])
    return {"submitter": text("submitter"), "division": text("division"), "availability": text("status"),
            "system_name": " ".join(str(rs._pretty_system_name(desc)).split()),
            "accelerator": str(desc["accelerator_model_name"]), "accelerators_per_node": per_node,
            "nodes": nodes, "accelerators": nodes * per_node,
            "host_processor": text("host_processor_model_name"),
            "framework": " ".join(str(rs._pretty_framework(desc)).split())}


def generate(mirrors: Path, rounds: list[str], work: Path, jobs: int,
             orgs: list[str] | None = None) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    commits: dict[str, str] = {}
    tasks = []
    systems: dict[tuple[str, str, str], dict[str, Any] | str] = {}
    for round_ in rounds:
        repo = mirrors / f"mlcommons+training_results_{round_}" / "repo"
        start = time.time()
        commit, missing = extract(repo, work / round_)
        commits[round_] = commit
        print(f"{round_}: extracted at {commit} in {time.time() - start:.0f} s "
              f"({len(missing)} blobs absent from the mirror)", file=sys.stderr)
        base = work / round_
        for org_dir in sorted(p for p in base.iterdir() if (p / "results").is_dir()
                              and (not orgs or p.name in orgs)):
            for system_dir in sorted(p for p in (org_dir / "results").iterdir() if p.is_dir()):
                for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
                    rel = f"{org_dir.name}/results/{system_dir.name}/{bench_dir.name}"
                    absent = sorted(m for m in missing if m.startswith(rel + "/") and is_result(m))
                    if absent:
                        skipped.append(f"{round_}/{rel}: {len(absent)} result log(s) absent from the mirror "
                                       f"(snapshots lack files of 4 MiB and more)")
                        continue
                    if not any(p.name.startswith("result_") for p in bench_dir.iterdir()):
                        continue
                    key = (round_, org_dir.name, system_dir.name)
                    if key not in systems:
                        systems[key] = load_system(org_dir, system_dir.name)
                    if isinstance(systems[key], str):
                        skipped.append(f"{round_}/{rel}: {systems[key]}")
                        continue
                    tasks.append((str(bench_dir), bench_dir.name, round_, rel))
        # folders whose every log is absent were never written: report them too
        for path in sorted({"/".join(m.split("/")[:4]) for m in missing if is_result(m)}):
            if not (base / path).is_dir() and (not orgs or path.split("/")[0] in orgs):
                skipped.append(f"{round_}/{path}: every result log absent from the mirror")
    print(f"scoring {len(tasks)} folders with {jobs} worker(s)", file=sys.stderr)
    start = time.time()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for done, res in enumerate(pool.map(score_folder, tasks, chunksize=1), start=1):
            folder, _, round_, rel = res["task"]
            org, _, system, _ = rel.split("/")
            if done % 100 == 0:
                print(f"  {done}/{len(tasks)} in {time.time() - start:.0f} s", file=sys.stderr)
            if "error" in res:
                skipped.append(f"{round_}/{rel}: {res['error']}")
                continue
            for name in res["dropped_files"]:
                print(f"  note {round_}/{rel}/{name}: {why(res['log'], name)}", file=sys.stderr)
            if res["score"] is None or res["mean"] is None:
                skipped.append(f"{round_}/{rel}: no score ({res['dropped']} of {res['files']} result "
                               f"files dropped by the summarizer; at most "
                               f"{4 if res['benchmark'] == 'unet3d' else 1} may be)")
                continue
            score = res["mean"] * res["scaling"]
            if score != res["score"]:
                raise SystemExit(f"{round_}/{rel}: mean x scaling {score!r} != summarizer {res['score']!r}")
            desc = systems[(round_, org, system)]
            assert isinstance(desc, dict)
            rows.append({"round": round_, "org": org, **{k: desc[k] for k in ("submitter", "division",
                         "availability")}, "system": system,
                         **{k: v for k, v in desc.items() if k not in ("submitter", "division", "availability")},
                         "benchmark": res["benchmark"], "result_files": res["files"],
                         "runs_required": res["required"], "runs_dropped": res["dropped"],
                         "mean_minutes": res["mean"], "scaling_factor": res["scaling"],
                         "score_minutes": score, "repo": f"mlcommons/training_results_{round_}",
                         "commit": commits[round_]})
    rows.sort(key=lambda r: (r["round"], r["org"], r["system"], r["benchmark"]))
    return rows, skipped, commits


def load_system(org_dir: Path, system: str) -> dict[str, Any] | str:
    path = org_dir / "systems" / f"{system}.json"
    if not path.is_file():
        return f"no system JSON {org_dir.name}/systems/{system}.json"
    try:
        return system_columns(json.loads(path.read_text(encoding="utf-8", errors="replace")))
    except (ValueError, KeyError, TypeError) as exc:
        return f"system JSON unusable: {type(exc).__name__}: {exc}"


def write(rows: list[dict[str, Any]]) -> None:
    with OUT.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([repr(row[c]) if isinstance(row[c], float) else row[c] for c in COLUMNS])


def check(rows: list[dict[str, Any]], work: Path, sample: list[str]) -> list[str]:
    """Re-score sample systems with the official summarizer CLI on copies; compare."""
    failures = []
    by_key = {(r["round"], r["org"], r["system"], r["benchmark"]): r for r in rows}
    for item in sample:
        round_, org, system = item.split("/")
        src = work / round_ / org
        if not (src / "results" / system).is_dir():
            failures.append(f"check {item}: not in the extracted trees")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            dest = Path(tmp) / org
            shutil.copytree(src / "results" / system, dest / "results" / system)
            (dest / "systems").mkdir()
            shutil.copy(src / "systems" / f"{system}.json", dest / "systems")
            start = time.time()
            proc = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(dest),
                                   "training", ruleset(round_), "--csv", "summary.csv"],
                                  cwd=tmp, capture_output=True, text=True)
            if proc.returncode or not (Path(tmp) / "summary.csv").is_file():
                failures.append(f"check {item}: summarizer exit {proc.returncode}: {proc.stderr[-300:]}")
                continue
            with (Path(tmp) / "summary.csv").open() as handle:
                official = list(csv.DictReader(handle))
        for entry in official:
            for bench, value in entry.items():
                if (round_, org, system, bench) not in by_key or value in ("", None):
                    continue
                ours = by_key[(round_, org, system, bench)]["score_minutes"]
                same = math.isclose(ours, float(value), rel_tol=1e-12)
                print(f"check {item} {bench}: summarizer CLI {float(value)!r}, table {ours!r} "
                      f"{'OK' if same else 'MISMATCH'} ({time.time() - start:.0f} s)", file=sys.stderr)
                if not same:
                    failures.append(f"check {item} {bench}: {value} != {ours}")
        scored = {b for (r, o, s, b) in by_key if (r, o, s) == (round_, org, system)}
        seen = {b for entry in official for b, v in entry.items() if (round_, org, system, b) in by_key and v}
        for bench in sorted(scored - seen):
            failures.append(f"check {item} {bench}: the summarizer CLI gave no score")
    return failures


def licence(repo: Path) -> str:
    """What the tree at HEAD says about its licence: the top-level LICENSE.md, else the
    submitter folders' own LICENSE.md files."""
    def apache(path: str) -> bool:
        return "Apache License" in git(repo, "show", f"HEAD:{path}")[:400]

    top = [p for p in git(repo, "ls-tree", "--name-only", "HEAD").splitlines() if p.upper().startswith("LICENSE")]
    if top:
        return "Apache-2.0 (top-level " + ", ".join(top) + ")" if all(apache(p) for p in top) else \
            "see top-level " + ", ".join(top)
    orgs = [p for p in git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
            if p.count("/") == 1 and p.split("/")[1].upper().startswith("LICENSE")]
    named = ", ".join(f"{p} ({'Apache-2.0' if apache(p) else 'other'})" for p in orgs)
    return f"no top-level licence file at this commit; submitter folders: {named or 'none'}"


def attribution(commits: dict[str, str], mirrors: Path) -> None:
    lines = ["# Attribution",
             "",
             "`training_results.csv` is derived from the MLCommons Training results repositories below;",
             "copyright their submitters. They carry the Apache License 2.0",
             "(https://www.apache.org/licenses/LICENSE-2.0) as a top-level LICENSE.md, or, where a tree has",
             "none at the commit used, only in some submitter folders: the licence column says which. No log,",
             "code or system description is copied: each row holds fields of a system JSON",
             "(`<org>/systems/<system>.json`: submitter, division, status, system_name,",
             "accelerator_model_name, accelerators_per_node, number_of_nodes, host_processor_model_name,",
             "framework), the count of result logs in `<org>/results/<system>/<benchmark>/`, the olympic",
             "mean time-to-train computed from those logs by mlperf_logging's result_summarizer (the runs",
             "it accepts after its compliance check), the `scaling_factor` of that folder's `scaling.json`",
             "(1.0 when absent) and their product, the published score. Regenerate with",
             "`python recipes/published/generate.py MIRRORS` (see its docstring); result folders whose",
             "logs were absent from the mirrors are not in the table.",
             "",
             "`accelerators.csv` holds, for every system JSON of the same trees, its round, submitter",
             "folder, system name and `accelerator_model_name` field, nothing else (`generate.py",
             "--accelerators-only` rewrites it).",
             "",
             "| round | repository | commit | licence | derived |",
             "|---|---|---|---|---|"]
    for r, c in sorted(commits.items()):
        repo = mirrors / f"mlcommons+training_results_{r}" / "repo"
        lines.append(f"| {r} | https://github.com/mlcommons/training_results_{r} | {c} | {licence(repo)} | "
                     f"`<org>/systems/*.json` fields; scores of `<org>/results/*/*/result_*.txt` x `scaling.json` |")
    (HERE / "ATTRIBUTION.md").write_text("\n".join(lines) + "\n")


def system_accelerators(mirrors: Path, rounds: list[str]) -> list[tuple[str, str, str, str]]:
    """(round, org, system, accelerator_model_name) of every <org>/systems/<system>.json at HEAD,
    read straight from the mirrors (an unreadable JSON is reported and left out)."""
    out = []
    for round_ in rounds:
        repo = mirrors / f"mlcommons+training_results_{round_}" / "repo"
        for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
            parts = path.split("/")
            if len(parts) != 3 or parts[1] != "systems" or not parts[2].endswith(".json"):
                continue
            try:
                name = json.loads(git(repo, "show", f"HEAD:{path}"))["accelerator_model_name"]
            except (ValueError, KeyError, TypeError, subprocess.CalledProcessError) as exc:
                print(f"{round_}/{path}: unreadable ({type(exc).__name__}): left out", file=sys.stderr)
                continue
            out.append((round_, parts[0], parts[2].removesuffix(".json"), str(name)))
    return sorted(out)


def write_accelerators(entries: list[tuple[str, str, str, str]]) -> None:
    with ACCELERATORS_OUT.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("round", "org", "system", "accelerator"))
        writer.writerows(entries)


def known_accelerators() -> dict[str, str | None]:
    sys.path.insert(0, str(ROOT))
    from orchestrator.hardware.catalog import accelerator_names
    return accelerator_names()


def summary(rows: list[dict[str, Any]], skipped: list[str]) -> None:
    ACCELERATORS = known_accelerators()

    print(f"\n{len(rows)} rows, {OUT.stat().st_size} bytes -> {OUT.relative_to(ROOT)}", file=sys.stderr)
    for title, field in (("round", "round"), ("benchmark", "benchmark")):
        counts = collections.Counter(r[field] for r in rows)
        print(f"rows per {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    names = collections.Counter(r["accelerator"] for r in rows)
    print("accelerators (rows -> catalog):", file=sys.stderr)
    for name, count in sorted(names.items()):
        mapped = ACCELERATORS[name] if name in ACCELERATORS else "UNKNOWN (not in the catalog)"
        print(f"  {name!r}: {count} -> {mapped}", file=sys.stderr)
    unknown = sorted(n for n in names if n not in ACCELERATORS)
    print(f"accelerator names not in the catalog: {unknown or 'none'}", file=sys.stderr)
    short = [r for r in rows if r["result_files"] != r["runs_required"]]
    print(f"rows whose result file count differs from the benchmark's required runs: {len(short)}", file=sys.stderr)
    for r in short:
        print(f"  {r['round']}/{r['org']}/{r['system']}/{r['benchmark']}: {r['result_files']} files, "
              f"{r['runs_required']} required", file=sys.stderr)
    print(f"skipped {len(skipped)} result folder(s):", file=sys.stderr)
    for line in skipped:
        print(f"  {line}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirrors", type=Path)
    parser.add_argument("--rounds", nargs="+", default=list(ROUNDS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", type=Path, help="extract here (default: a temp dir, removed)")
    parser.add_argument("--orgs", nargs="+", help="only these submitter folders (for a quick try)")
    parser.add_argument("--check", nargs="*", default=list(CHECK),
                        help="round/org/system to re-score with the summarizer CLI (none: skip)")
    parser.add_argument("--accelerators-only", action="store_true",
                        help="write only accelerators.csv (every system JSON's accelerator)")
    args = parser.parse_args()
    entries = system_accelerators(args.mirrors, args.rounds)
    write_accelerators(entries)
    unknown = sorted({e[3] for e in entries} - set(known_accelerators()))
    print(f"{len(entries)} system JSONs -> {ACCELERATORS_OUT.relative_to(ROOT)}; accelerator names not "
          f"in the catalog: {unknown or 'none'}", file=sys.stderr)
    if args.accelerators_only:
        return
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="published-")))
        rows, skipped, commits = generate(args.mirrors, args.rounds, work, args.jobs, args.orgs)
        write(rows)
        attribution(commits, args.mirrors)
        summary(rows, skipped)
        failures = check(rows, work, [c for c in args.check if c.split("/")[0] in args.rounds])
    for line in failures:
        print(line, file=sys.stderr)
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
