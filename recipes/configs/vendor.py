"""Vendor MLPerf submissions' config_*.sh files and the names their implementations read.

Run by hand (not by azbench, not by the tests) against local git mirrors of
mlcommons/training_results_v3.1 .. v5.1:

    python recipes/configs/vendor.py /path/to/mirrors   # <dir>/mlcommons+training_results_vX/repo

For every (recipe, implementation folder, entry config) in TABLE it copies, byte for byte, the
entry config and the shared config_*.sh files next to it (config_common*.sh, config_fp8.sh; not
the other per-scale configs nor config_mounts.sh) into recipes/configs/<recipe>/<tag>/, writes
READS.txt (every environment variable name the implementation's scripts, Python and YAML read)
and records repository, commit and path in recipes/configs/ATTRIBUTION.md. The files are
Apache-2.0 (the training_results repositories' LICENSE).
"""

from __future__ import annotations

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
         ["config_GB200_128x4x144xtp4pp8cp2_cg.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu2560_ngc25.09_nemo",
         ["config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh"]),
        ("v5.1", "NVIDIA/benchmarks/llama31_405b/implementations/hsg_ngpu5120_ngc25.09_nemo",
         ["config_GB200_1280x4x16xtp4pp8cp2_cg_fp4.sh"]),
    ],
    "llama31_8b": [
        ("v5.1", "NVIDIA/benchmarks/llama31_8b/implementations/nemo",
         ["config_GB200_2x4x2xtp1pp1cp1_8b_fp4.sh", "config_GB200_18x4x1xtp1pp1cp2_8b.sh",
          "config_GB200_128x4x1xtp2pp1cp4_8b.sh"]),
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
         ["config_GB200_2x4x2xtp1pp1cp2_fp4.sh", "config_GB200_18x4x1xtp1pp1cp8.sh"]),
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
            (out / "READS.txt").write_text(
                f"# Environment variable names read by mlcommons/training_results_{round_} @ {commit}\n"
                f"# {impl}/ (*.sh, run.sub, *.py, *.yaml: $X / ${{X}}, os.environ, getenv, oc.env:X),\n"
                f"# extracted by recipes/configs/vendor.py. Apache-2.0, see ../../ATTRIBUTION.md.\n"
                + "".join(f"{n}\n" for n in sorted(names)))
            rows.append((f"{recipe}/{tag}/READS.txt", f"mlcommons/training_results_{round_}", commit,
                         f"{impl}/ (names extracted)"))
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


if __name__ == "__main__":
    main(Path(sys.argv[1]))
