"""How numbers read, in every view: the terminal report, Markdown, the site, `plan`, `compare`,
`baseline` and the CLI's tables. One home, so a count never reads `10,752` in one place and
`8192` in the next, and a scale always reads "512 GPUs (128 nodes)".

Every function takes None (or NaN) and returns "-" for it; every number of 1,000 or more has
thousands separators. Returns strings; computes no figure (a figure's rule lives where it is
computed: report.build, forecast, pipelines.baselines).
"""

from __future__ import annotations

import math

NONE = "-"


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def count(value: float | None) -> str:
    """A whole number: "8,192", "512"."""
    if value is None or _missing(float(value)):
        return NONE
    return f"{int(round(value)):,}"


def fixed(value: float | None, digits: int) -> str:
    """`digits` decimals: "20.807", "23,061.56"."""
    if value is None or _missing(float(value)):
        return NONE
    return f"{value:,.{digits}f}"


def sig(value: float | None, digits: int = 4) -> str:
    """`digits` significant figures, never in exponent form: "17.29", "0.1334", "11,819"
    (a number with more whole digits than that keeps them all)."""
    if value is None or _missing(float(value)):
        return NONE
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return "0" if float(text.replace(",", "")) == 0 else text


def usd(value: float | None, digits: int = 2) -> str:
    """Dollars: "$21,682.57" ("$58,312" with digits=0)."""
    if value is None or _missing(float(value)):
        return NONE
    return f"${value:,.{digits}f}"


def pct(value: float | None, digits: int = 1, signed: bool = False) -> str:
    """A fraction as percent: 0.445 -> "44.5%"; signed: "+3.0%", "-1.2%", never "-0.0%"."""
    if value is None or _missing(float(value)):
        return NONE
    number = round(value * 100, digits) + 0.0  # + 0.0: never "-0.0%"
    return f"{number:+,.{digits}f}%" if signed else f"{number:,.{digits}f}%"


def plural(n: int, word: str) -> str:
    """"1 node", "128 nodes", "1,280 nodes"."""
    return f"{count(n)} {word}{'' if n == 1 else 's'}"


def scale(gpus: int | None, nodes: int | None) -> str:
    """A system's size as a reader counts it: "512 GPUs (128 nodes)", "8 GPUs (1 node)"; the
    nodes alone when the GPU count is unknown (or there are none: a CPU run), "-" when neither is."""
    if gpus and nodes and gpus != nodes:
        return f"{plural(gpus, 'GPU')} ({plural(nodes, 'node')})"
    if gpus:
        return plural(gpus, "GPU")
    if nodes:
        return plural(nodes, "node")
    return NONE
