"""Long names made short for tables and charts: cut in the middle, and kept apart.

MLPerf system names are long ("v5.1/NVIDIA/tyche_ngpu512_ngc25.09_nemo"); a terminal column or a
chart's category axis has room for part of one. `cut_middle` keeps the head (where system names
say their size) and the tail; `cut_apart` cuts a list so that different names never read the
same after cutting.
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def cut_middle(text: str, width: int) -> str:
    """`text` in `width` characters, its middle cut: two thirds head, one third tail."""
    if len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = (2 * (width - 1) + 2) // 3
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head):]


def cut_apart(texts: Sequence[str], width: int) -> list[str]:
    """Each text cut to `width` (cut_middle); where two different texts would read the same,
    the later one is cut elsewhere until it reads apart ("…_n4_ngc25…" vs "…_n18_ngc25…")."""
    out = [cut_middle(t, width) for t in texts]
    for i, text in enumerate(texts):
        if len(text) <= width or width < 5:
            continue
        clash = any(out[j] == out[i] and texts[j] != text for j in range(len(texts)) if j != i)
        taken = {out[j] for j in range(len(texts)) if j != i}
        for head in (range(width - 2, 0, -1) if clash else ()):
            other = text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head):]
            if other not in taken:
                out[i] = other
                break
    return out
