"""The attempt history of runs that needed more than one try: what failed, what was excluded,
where it resumed and how much work was lost. Pure; part of `azbench report`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from orchestrator.store_schema import AttemptRow, ResultRow, RunRow


class AttemptLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    recipe: str
    nodes: int
    attempt: int
    state: str
    failure_class: str | None = None
    excluded_nodes: list[str] = []
    resumed_from_step: int | None = None
    lost_steps: int | None = None
    lost_seconds: float | None = None
    result_resumed: bool = False
    message: str | None = None


def attempt_history(runs: Sequence[RunRow] | None, attempts: Sequence[AttemptRow] | None,
                    results: Sequence[ResultRow]) -> list[AttemptLine]:
    """Every attempt of the runs that failed at least once (retried or not), oldest first."""
    if not runs or not attempts:
        return []
    by_run: dict[str, list[AttemptRow]] = {}
    for a in attempts:
        by_run.setdefault(a.run_id, []).append(a)
    resumed = {r.run_id for r in results if r.resumed and r.run_id}
    lines: list[AttemptLine] = []
    for run in runs:
        tries = sorted(by_run.get(run.id, []), key=lambda a: a.attempt)
        if len(tries) < 2 and not any(a.failure_class for a in tries):
            continue
        lines += [AttemptLine(run_id=run.id, recipe=run.recipe, nodes=run.nodes, attempt=a.attempt,
                              state=a.state, failure_class=a.failure_class,
                              excluded_nodes=list(a.excluded_nodes),
                              resumed_from_step=a.resumed_from_step, lost_steps=a.lost_steps,
                              lost_seconds=a.lost_seconds, result_resumed=run.id in resumed,
                              message=a.message) for a in tries]
    return lines


def history_section(lines: Sequence[AttemptLine]) -> tuple[str, list[str], list[list[str]]]:
    header = ["run", "nodes", "attempt", "state", "failure", "excluded", "resumed from step",
              "lost steps", "lost s", "result"]
    rows = [[line.run_id, str(line.nodes), str(line.attempt), line.state, line.failure_class or "-",
             ",".join(line.excluded_nodes) or "-",
             "-" if line.resumed_from_step is None else str(line.resumed_from_step),
             "-" if line.lost_steps is None else str(line.lost_steps),
             "-" if line.lost_seconds is None else f"{line.lost_seconds:.1f}",
             "resumed (unofficial)" if line.result_resumed else ""] for line in lines]
    return "Attempt history (runs that failed at least once)", header, rows
