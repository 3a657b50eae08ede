"""`azbench catalog` and `azbench init`: the GPU VM sizes azbench knows, and an example
cluster spec to start from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from orchestrator.cli.common import Col, JsonOpt, OutputFormat, OutputOpt, QueryOpt, app, fit_table, make_console, output
from orchestrator.errors import ConfigError
from orchestrator.hardware import catalog as sizes  # sizes.CATALOG, read when the command runs
from orchestrator.paths import templates_dir, write_atomic


@app.command()
def catalog(as_json: bool = JsonOpt, fmt: Optional[OutputFormat] = OutputOpt,
            query: Optional[str] = QueryOpt) -> None:
    """The GPU VM sizes azbench knows (prices are list-price estimates)."""
    out = output(as_json, fmt, query)
    if not out.rich:
        return out.emit(list(sizes.CATALOG))
    rows = [[s.short, s.name, ", ".join(s.aliases), f"{s.gpus_per_vm} x {s.gpu_model}",
             s.vcpus or "-", s.ram_gib or "-",
             f"{s.ib_links} x {s.ib_gbps_per_link} Gb/s" if s.ib_links else "-",
             s.nvlink_domain_vms, s.cpu_arch, s.quota_family or "-",
             f"~${s.price_per_hour_usd:,.2f}" if s.price_per_hour_usd is not None else "unknown",
             s.peak_tflops_bf16 or "-", s.peak_tflops_fp8 or "-"] for s in sizes.CATALOG]
    console = make_console()
    table, hidden = fit_table(
        "GPU VM catalog (price: Linux pay-as-you-go list estimate per VM-hour)", _CATALOG_COLUMNS,
        rows, console.width)
    console.print(table)
    if hidden:
        console.print(f"not shown at {console.width} columns: {', '.join(hidden)} "
                      "(a wider terminal shows them; -o json has every field)", markup=False)


# The catalog's columns in display order; rank 0 is kept first on a narrow terminal. Names and
# quota families are single words that must not be cut; the rest wrap at spaces.
_CATALOG_COLUMNS = [Col("size", 0), Col("name", 1, wrap=False), Col("aliases", 4), Col("GPUs/VM", 2),
                    Col("vCPU", 6), Col("RAM GiB", 7), Col("InfiniBand", 5), Col("NVLink VMs", 8),
                    Col("arch", 9), Col("quota family", 12, wrap=False), Col("price/h", 3, wrap=False),
                    Col("BF16 TF/GPU", 10), Col("FP8 TF/GPU", 11)]


@app.command()
def init(path: Path = typer.Argument(Path("cluster.yaml"), help="Where to write the example."),
         force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
    """Write a commented example cluster.yaml."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory: give a file name such as {path / 'cluster.yaml'}")
    if path.exists() and not force:
        raise ConfigError(f"{path} exists: pass --force to overwrite it")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: directory {path.parent} does not exist")
    text = (templates_dir() / "cluster.example.yaml").read_text()
    try:
        write_atomic(path, text)
    except OSError as exc:  # read-only file system, permissions, a vanished folder...
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    sys.stdout.write(f"wrote {path}\n")


