"""Locate the data that ships with azbench: templates/ and recipes/.

In a wheel they live in orchestrator/_data/ (hatch force-include); in a source checkout, at
the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`templates` or `recipes`: the installed copy if present, else the checkout's."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"azbench data folder '{name}' is missing from this installation")


def templates_dir() -> Path:
    return data_dir("templates")


def recipes_dir() -> Path:
    return data_dir("recipes")
