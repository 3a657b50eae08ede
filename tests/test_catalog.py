"""The VM catalog (orchestrator/hardware/sizes.yaml, loaded by hardware/catalog.py): every row
complete and sourced, the file validated at load, unknown sizes named, ND GB300 v6's published
facts, every accelerator of the published MLPerf trees mapped, a new size being one row, and no
GPU or size named in string constants outside hardware/.
"""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import ConfigError, NotFoundError
from orchestrator.hardware import catalog
from orchestrator.hardware.catalog import GpuSku, accelerator_names, lookup
from orchestrator.paths import recipes_dir
from tests.cli_helpers import azbench_in_process
from testsupport.mlperf_tree import LORA, SynthSystem, write_tree

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = recipes_dir() / "published"
SOURCES = ("facts_source", "rack_source", "platform_source", "price_source", "peak_source",
           "busbw_source")


def _raw() -> dict[str, Any]:
    data = yaml.safe_load(catalog.SIZES_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# -- every row complete and sourced ------------------------------------------------------------

def test_every_row_gives_every_field_in_the_file() -> None:
    fields = set(GpuSku.model_fields)
    for row in _raw()["sizes"]:
        assert set(row) == fields, (row.get("name"), sorted(fields ^ set(row)))


def test_every_fact_says_where_it_comes_from_or_why_it_is_missing() -> None:
    for row in catalog.rows():
        for name in SOURCES:
            assert getattr(row, name).strip(), (row.name, name)
            assert len(getattr(row, name)) > 20 or not row.gpus_per_vm, (row.name, name)
        assert row.network.source and row.mlperf.source, row.name
        if row.price_per_hour_usd is not None:
            assert "Retail Prices API" in row.price_source, row.name
            assert row.price_date or "undated" in row.price_source, row.name
        if not row.gpus_per_vm:
            continue
        assert row.nccl is not None and row.nccl.source, row.name
        assert row.peak_tflops_bf16 and row.peak_tflops_fp8, row.name
        if row.peak_tflops_fp4 is None:
            assert "no FP4" in row.peak_source, row.name
        if row.expected_busbw_gbps is None or row.nccl.expected_gbps != row.expected_busbw_gbps:
            assert any(w in row.busbw_source for w in ("not published", "nccl")), row.name
        assert row.mlperf.accelerators, row.name
        assert row.label and row.colour, row.name
        if row.nvlink_domain_vms > 1:
            assert row.rack_name and row.rack_layouts[0] == row.nvlink_domain_vms, row.name


def test_an_azure_gpu_size_has_a_network_profile_or_says_why_not() -> None:
    for row in catalog.gpu_skus():
        assert row.network.env or "none recorded" in row.network.source, row.name
    assert lookup("h100").network.topo_file == "/opt/microsoft/ndv5-topo.xml"
    assert lookup("local").network.env == {} and "no fabric" in lookup("local").network.source


# -- the file validated at load ----------------------------------------------------------------

def _broken(tmp_path: Path, change: Any) -> Path:
    data = _raw()
    change(data)
    path = tmp_path / "sizes.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _set(index: int, **fields: Any) -> Any:
    return lambda data: data["sizes"][index].update(fields)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["sizes"][0].pop("price_source"), r"sizes\.0\.price_source: Field required"),
    (_set(0, aliases=["h200"]), r"'h200' of Standard_ND96isr_H200_v5 already names Standard_ND96isr_H100_v5"),
    (_set(1, mlperf={"accelerators": ["NVIDIA H100-SXM5-80GB"], "systems": [], "source": "x"}),
     r"accelerator 'NVIDIA H100-SXM5-80GB' already maps to Standard_ND96isr_H100_v5"),
    (_set(0, mlperf={"accelerators": ["NVIDIA L40"], "systems": [], "source": "x"}),
     r"accelerator 'NVIDIA L40' is listed twice"),
    (_set(0, mlperf={"accelerators": ["x"], "systems": ["ND[_"], "source": "x"}), r"mlperf\.systems 'ND\[_'"),
    (_set(2, rack_layouts=[16, 18]), r"rack_layouts start with the full rack \(18\)"),
    (_set(0, nccl=None), r"a GPU size needs an nccl baseline"),
    (_set(0, price_date="last week"), r"price_date: String should match pattern"),
    (_set(0, colour="red"), r"colour: String should match pattern"),
    (lambda d: d["sizes"][0].update(surprise=1), r"unknown key 'sizes\.0\.surprise'"),
])
def test_a_broken_catalog_file_is_one_config_error_naming_file_and_line(
        tmp_path: Path, change: Any, message: str) -> None:
    path = _broken(tmp_path, change)
    with pytest.raises(ConfigError, match=message) as caught:
        catalog.load(path)
    assert re.match(rf"^{re.escape(str(path))}:\d+: ", caught.value.message), caught.value.message


def test_an_unknown_size_names_the_known_ones() -> None:
    with pytest.raises(NotFoundError) as caught:
        lookup("h1000")
    assert caught.value.message == "unknown SKU 'h1000'"
    assert caught.value.hint == ("did you mean 'h100'? known: h100, h200, gb200, gb300, mi300x, d4s_v5, "
                                 "d8s_v5, d16s_v5, local")
    with pytest.raises(NotFoundError, match=r"known: h100, .*local \(see `azbench catalog`\)"):
        lookup("zzzz")
    assert catalog.find("zzzz") is None and catalog.find(None) is None


def test_the_network_profile_is_the_rows_and_an_unknown_size_never_gets_an_empty_one() -> None:
    from orchestrator.recipes.parallelism import network_profile
    assert network_profile(lookup("gb300")) is lookup("gb300").network
    with pytest.raises(NotFoundError, match="unknown SKU 'nd-xyz'"):
        network_profile(lookup("nd-xyz"))


# -- ND GB300 v6 ---------------------------------------------------------------------------------

def test_nd_gb300_v6_is_azures_published_size_with_nvidias_peaks() -> None:
    row = lookup("gb300")
    assert row.name == "Standard_ND128isr_GB300_v6" and row.short == "ND GB300 v6" and row.label == "GB300"
    assert (row.gpus_per_vm, row.gpu_memory_gb, row.vcpus, row.ram_gib) == (4, 288, 128, 864)
    assert (row.ib_links, row.ib_gbps_per_link, row.nvlink_domain_vms, row.cpu_arch) == (4, 800, 18, "arm64")
    assert "nd-gb300-v6-series.md" in row.facts_source and "4x800" in row.facts_source
    assert row.rack_layouts == (18,) and row.quota_family == "standardNDISRGB300V6Family"
    # dense per GPU from NVIDIA's GB300 NVL72 table (per rack of 72, sparse except FP4's dense figure)
    assert (row.peak_tflops_bf16, row.peak_tflops_fp8, row.peak_tflops_fp4) == (2500.0, 5000.0, 15000.0)
    assert "gb300-nvl72" in row.peak_source and "1,080" in row.peak_source and "360" in row.peak_source
    assert 360e3 / 72 / 2 == row.peak_tflops_bf16 and 1080e3 / 72 == row.peak_tflops_fp4
    # no list price published: said so, and --price gives one
    assert row.price_per_hour_usd is None and "not published" in row.price_source
    assert "`azbench report --price gb300=USD`" in row.price_source
    assert row.nccl is not None and (row.nccl.expected_gbps, row.nccl.warn_gbps, row.nccl.replace_gbps) == (
        937.0, 800.0, 600.0)
    assert row.network.env["NCCL_MNNVL_ENABLE"] == "1" and "graceblackwell.conf" in row.network.source
    assert catalog.by_accelerator("NVIDIA Blackwell Ultra GPU (GB300)") is row
    assert catalog.size_in_system("ND_GB300_v6_n72") is row and catalog.size_in_system("theia_ngpu72") is None


# -- every accelerator of the published trees mapped ---------------------------------------------

def _csv(name: str) -> list[dict[str, str]]:
    with (PUBLISHED / name).open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_accelerator_of_the_v3_to_v5_1_trees_is_a_size_or_no_azure_size() -> None:
    known = accelerator_names()
    trees = _csv("accelerators.csv")  # every system JSON of the trees, scored or not
    assert {r["round"] for r in trees} == {"v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1"}
    table = _csv("training_results.csv")  # the published-results table the report and planner read
    names = {r["accelerator"] for r in trees} | {r["accelerator"] for r in table}
    assert sorted(names - set(known)) == []
    for name in names:
        row, why = catalog.by_accelerator(name), catalog.no_azure_size(name)
        assert (row is None) != (why is None), name  # one or the other, never both
    mapped = {known[n] for n in names if known[n]}
    assert mapped == {"h100", "h200", "gb200", "gb300", "mi300x"}
    theia = [r for r in table if r["system"].startswith("theia_")]
    assert len(theia) == 10 and {known[r["accelerator"]] for r in theia} == {"gb300"}
    assert known["NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)"] is None  # HGX, not Grace Blackwell


def test_the_trees_list_names_the_commits_the_attribution_gives() -> None:
    text = (PUBLISHED / "ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "`accelerators.csv`" in text
    rows = _csv("accelerators.csv")
    assert len(rows) > 500 and all(r["org"] and r["system"] and r["accelerator"] for r in rows)
    assert {"round": "v5.1", "org": "NVIDIA", "system": "theia_ngpu512_ngc25.09_nemo",
            "accelerator": "NVIDIA Blackwell Ultra GPU (GB300)"} in rows


# -- a new size is one row ---------------------------------------------------------------------

ZX = "Contoso ZX900 (fictitious)"


def _with_fictitious_row(tmp_path: Path) -> Path:
    data = _raw()
    row = dict(data["sizes"][1])
    row.update(name="Standard_ND64isr_ZX900_v9", short="ND ZX900 v9", label="ZX900",
               aliases=["zx900", "nd-zx900-v9"], colour="#123456", gpu_model="Contoso ZX900 96GB",
               quota_family="standardNDZX900v9Family", price_per_hour_usd=40.0, price_date="2026-11-28",
               price_source="Azure Retail Prices API row: a test's fiction",
               mlperf={"accelerators": [ZX], "systems": [r"ND[_ ]?ZX900[_ ]v\d"], "source": "fiction"})
    data["sizes"].append(row)
    path = tmp_path / "sizes.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_new_size_is_one_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One row added to a copy of sizes.yaml, nothing else changed: the size shows in `catalog`,
    `plan`, import, the report and the site."""
    sizes = _with_fictitious_row(tmp_path)
    before = catalog.load(catalog.SIZES_FILE)
    after = catalog.load(sizes)
    assert after.rows[:-1] == before.rows and after.no_azure == before.no_azure
    monkeypatch.setattr(catalog, "SIZES_FILE", sizes)
    home, env = tmp_path / "home", {"COLUMNS": "220"}

    listed = azbench_in_process("catalog", "--query", "[?label=='ZX900'].[name, quota_family]", "-o", "tsv",
                                home=home)
    assert listed.out.splitlines() == ["Standard_ND64isr_ZX900_v9\tstandardNDZX900v9Family"], listed.err
    table = azbench_in_process("catalog", home=home, env=env)
    assert "Standard_ND64isr_ZX900_v9" in table.out and "~$40.00" in table.out

    tree = write_tree(tmp_path / "tree", (
        SynthSystem("Zenith", "zx900_n2", ZX, 2, 8, (LORA,)),
        SynthSystem("Zenith", "zx900_n8", ZX, 8, 8, (LORA,), mfu=0.4),
        SynthSystem("Contoso", "ND_ZX900_v9_n4", ZX, 4, 8, (LORA,), mfu=0.42)))
    imported = azbench_in_process("results", "import", "--no-compliance", str(tree), home=home)
    assert imported.code == 0 and "imported 30 result(s)" in imported.out, imported.err

    report = azbench_in_process("report", "--json", home=home)
    assert report.code == 0, report.err
    import json
    groups = {g["system"]: g for g in json.loads(report.out)["groups"]}
    azure = groups["ND_ZX900_v9_n4"]  # an Azure system id: the size itself, priced as its VMs
    assert azure["sku"] == "Standard_ND64isr_ZX900_v9" and azure["gpu_type"] == "ZX900"
    assert azure["priced_vms"] == 4 and azure["price_per_vm_hour"] == 40.0
    other = groups["zx900_n8"]  # an accelerator name: the same GPUs as the size's VMs on Azure
    assert other["gpu_type"] == "ZX900" and other["priced_vms"] == 8 and other["mfu"] > 0
    assert other["mfu_peak_tflops"] == lookup("h200").peak_tflops(other["mfu_precision"])  # the copied peaks

    plan = azbench_in_process("plan", LORA, "--sku", "zx900", "--json", home=home)
    assert plan.code == 0, plan.err
    planned = json.loads(plan.out)
    assert (planned["sku"], planned["gpu"], planned["price_per_vm_hour_usd"]) == (
        "Standard_ND64isr_ZX900_v9", "zx900", 40.0)
    assert planned["rows"] and all(r["minutes"] > 0 for r in planned["rows"]), planned["rows"][:1]

    site = tmp_path / "site"
    built = azbench_in_process("report", "--html", str(site), home=home)
    assert built.code == 0, built.err
    page = (site / "bench" / f"{LORA}.html").read_text(encoding="utf-8")
    assert "ZX900: forecast time-to-train" in page and "#123456" in page  # its label and colour
    assert "8 x ND ZX900 v9 on Azure at $40.00/VM-hour" in page


# -- no GPU or size named outside hardware/ ------------------------------------------------------

SCANNED = ("results", "fabric", "report", "recipes", "forecast", "runs", "slurm")
MODEL = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{1,3}[0-9]{2,4}[A-Za-z]?(?![A-Za-z0-9])")


def forbidden_words() -> set[str]:
    """What names a GPU or a size, from the catalog: each GPU size's name, short name, label,
    aliases and rack name, Azure's size prefix, and the model numbers ("B200", "MI325X") in every
    accelerator name the catalog knows."""
    words = {catalog.AZURE_PREFIX}
    for row in catalog.gpu_skus():
        words |= {row.name, row.short, row.label, *row.aliases}
        words |= set(row.rack_name.split()[:1])
    for name in accelerator_names():
        words |= set(MODEL.findall(name))
    return {w.lower() for w in words if w}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def gpu_constants(source: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each string constant in `source` (f-string parts, help texts, field
    descriptions and regexes included; docstrings not) that names one of `words`."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    pattern = re.compile("|".join(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])"
                                  for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and pattern.search(node.value)]


def test_the_scan_finds_what_it_is_for() -> None:
    words = forbidden_words()
    assert {"h100", "standard_nd96isr_h100_v5", "nd gb300 v6", "gb300", "nvl72", "b200", "mi325x",
            "standard_"} <= words
    planted = ('"""A docstring naming H100 is allowed."""\n'
               'HELP = "VM size or alias: h100, h200"\n'
               'RE = r"ND[_ ]?(H100|GB200)[_ ]v\\d"\n'
               'F = f"config_GB200_{n}x04.sh"\n'
               'D = {"h200": 1}\n'
               'P = sku.removeprefix("Standard_")\n'
               'X = "#a30b2c"  # a colour, not an A30\n'
               'def f():\n    """Docstring: ND H100 v5."""\n    return "B200-SXM"\n')
    assert [line for line, _ in gpu_constants(planted, words)] == [2, 3, 4, 5, 6, 10]


def test_no_string_constant_names_a_gpu_or_size_outside_hardware() -> None:
    words = forbidden_words()
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / "orchestrator" / folder).rglob("*.py")):
            for line, text in gpu_constants(path.read_text(encoding="utf-8"), words):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}")
    assert found == [], "\n".join(found)
