"""The one env-export builder (seams.env_exports): every place azbench writes `export KEY=value`
into shell text (remote commands, sbatch and container launch scripts, the Azure ML job command)
checks the name and quotes the value the same way."""

from __future__ import annotations

import pytest

from orchestrator.providers.azureml.launcher import wrap_command
from orchestrator.errors import ConfigError
from orchestrator.models import AttemptSpec
from orchestrator.seams import command_line, env_exports, shell_name
from orchestrator.slurm.batch import render_sbatch
from orchestrator.templating import environment

BAD_NAMES = ["BAD-NAME", "1X", "A B", "X;rm -rf /", "X\n", ""]


def _attempt(env: dict[str, str]) -> AttemptSpec:
    return AttemptSpec(run_id="r1", attempt=1, recipe="smoke", nodes=1, run_dir="/tmp/r1",
                       command="python3 train.py", env=env)


def test_exports_are_sorted_quoted_and_end_as_asked():
    env = {"B": "two words", "a_lower": "$(x)", "A": "1"}
    assert env_exports(env) == "export A=1; export a_lower='$(x)'; export B='two words'; "
    assert env_exports(env, end="\n").splitlines()[0] == "export A=1"
    assert env_exports({}) == ""


@pytest.mark.parametrize("name", BAD_NAMES)
def test_every_writer_rejects_a_bad_name_in_one_line(name):
    for write in (lambda: command_line("true", {name: "x"}),
                  lambda: render_sbatch(_attempt({name: "x"})),
                  lambda: environment().from_string("{{ env | exports }}").render(env={name: "x"}),
                  lambda: shell_name(name),
                  lambda: wrap_command(_attempt({}), {name: "data"})):
        with pytest.raises(ConfigError) as err:
            write()
        message = err.value.message.replace(repr(name), "NAME")
        assert "not a valid shell name" in message and "\n" not in message


def test_the_sbatch_script_exports_through_the_builder():
    script = render_sbatch(_attempt({"NCCL_DEBUG": "INFO", "MSG": "a b"}))
    assert env_exports({"NCCL_DEBUG": "INFO", "MSG": "a b"}, end="\n") in script
