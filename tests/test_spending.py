"""`azbench up` asks before spending and honours the cost cap, driven against the fake ARM.

The in-process tests run the real CLI entry point (`main`) with the Azure provider's clients
pointed at the loopback fake and a credential that records every token request, so "refused"
can be checked as "no request reached ARM and no credential was used".
"""

from __future__ import annotations

import re

import io
import sys
from typing import Any

import pytest

from orchestrator.clusters import spending
from orchestrator.providers.azure.clients import AzureClients
from orchestrator.specs.cluster import ClusterSpec
from orchestrator.errors import ConfigError
from tests.cli_helpers import azbench, one_line_error
from testsupport.fake_arm import SUB, StubCredential, allow_plain_http_policy

SPEC = """\
name: spend
provider: azure
sku: h100
nodes: 2
region: eastus
azure:
  ssh_ingress_cidr: 203.0.113.7/32
  expires_hours: 6
  idle_minutes: 30
  boot_timeout_s: 0  # this fake does not boot VMs (tests/test_azure_e2e.py has the one that does)
"""


class CountingCredential(StubCredential):
    def __init__(self) -> None:
        self.calls = 0

    def get_token(self, *scopes: str, **kw: Any) -> Any:
        self.calls += 1
        return super().get_token(*scopes, **kw)


@pytest.fixture
def wired(fake, azbench_home, monkeypatch, tmp_path):
    """The azure provider's production client factory replaced by one aimed at the fake."""
    from orchestrator.providers.azure import provider as azure
    cred = CountingCredential()
    clients = AzureClients(credential=cred, subscription_id=SUB, base_url=fake.base_url,
                           per_call_policies=[allow_plain_http_policy()], polling_interval=0.01,
                           retry_backoff_factor=0.01)
    monkeypatch.setattr(azure, "clients_from_config", lambda **kw: clients)
    monkeypatch.setenv("AZBENCH_OWNER", "tester")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    path = tmp_path / "spend.yaml"
    path.write_text(SPEC)
    return cred, path


def run_cli(*args: str) -> int:
    from orchestrator.cli.app import main
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return int(exit_.value.code or 0)


def test_up_without_yes_and_without_a_terminal_refuses_before_any_request(fake, wired, capsys):
    cred, path = wired
    assert run_cli("up", "-f", str(path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("azbench: config error: Create cluster 'spend' (azure in eastus): "
                          "2 x Standard_ND96isr_H100_v5 = 16 GPUs, ~$197.02/h (list price), "
                          "expires after 6 h or 30 min without a Slurm job: at most ~$1,182.12 until it deletes "
                          "itself (6 h x $197.02/h)?")  # issue 32: the worst case before self-expiry
    assert err.endswith("needs confirmation: pass --yes (stdin is not a terminal)") and "\n" not in err
    assert fake.log == [] and cred.calls == 0


def test_up_with_yes_proceeds_and_creates_the_cluster(fake, wired, capsys, azbench_home):
    cred, path = wired
    assert run_cli("up", "-f", str(path), "--yes") == 0
    out, err = capsys.readouterr()
    # issue 32: the plan, not "creating" (a preflight refusal may still come)
    assert "plan: cluster 'spend' (azure in eastus): 2 x Standard_ND96isr_H100_v5" in out and "creating" not in out
    assert "cluster 'spend' up: 2 x Standard_ND96isr_H100_v5" in out
    assert sorted(fake.of_type("virtualMachineScaleSets")) == ["spend-gpu-00"]
    assert cred.calls > 0


@pytest.mark.parametrize("args, cap", [(["--max-cost-per-hour", "100"], "$100.00/h"),
                                       (["--max-cost-per-hour", "500"], "$150.00/h")])
def test_a_plan_over_the_cap_is_refused_even_with_yes(fake, wired, capsys, args, cap):
    cred, path = wired
    path.write_text(SPEC + "  max_cost_per_hour: 150\n")  # the lower of flag and spec wins
    assert run_cli("up", "-f", str(path), "--yes", *args) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"azbench: config error: cluster 'spend' would cost ~$197.02/h, over the cap of {cap} "
                   "(--max-cost-per-hour / azure.max_cost_per_hour) (use fewer nodes or a smaller size, "
                   "or raise the cap)")
    assert fake.log == [] and cred.calls == 0


def test_dry_run_also_honours_the_cap_and_a_plan_under_it_passes(wired, capsys):
    _, path = wired
    assert run_cli("up", "-f", str(path), "--dry-run", "--max-cost-per-hour", "100") == 2
    capsys.readouterr()
    assert run_cli("up", "-f", str(path), "--dry-run", "--max-cost-per-hour", "200") == 0
    assert "2 x Standard_ND96isr_H100_v5 = 16 GPUs" in capsys.readouterr().out


def test_the_real_cli_without_a_terminal_refuses_with_exit_2(fake, azbench_home):
    env = {"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_RESOURCE_MANAGER_ENDPOINT": fake.base_url,
           "AZBENCH_CALLER_IP": "203.0.113.7"}
    result = azbench("up", "--provider", "azure", "--sku", "h100", "--nodes", "4", "--region", "eastus",
                     home=azbench_home, env=env)
    assert result.code == 2
    line = one_line_error(result)
    assert ("4 x Standard_ND96isr_H100_v5 = 32 GPUs, ~$393.66/h (list price), expires after 24 h: at most "
            "~$9,447.84 until it deletes itself (24 h x $393.66/h)?") in line
    assert fake.log == []


def test_free_providers_do_not_ask(azbench_home):
    result = azbench("up", "--provider", "fake", "--name", "free", "--sku", "h100", "--nodes", "1",
                     home=azbench_home)
    assert result.code == 0, result.err
    assert not spending.spends_money("local") and spending.spends_money("azureml")


def test_cap_rules_without_a_price_or_a_cap():
    spec = ClusterSpec(name="x", provider="azure", sku="h100", nodes=1, region="eastus",
                       azure={"max_cost_per_hour": 10})
    from orchestrator.clusters.lifecycle import plan
    the_plan = plan(spec)
    spending.check_cost_cap(the_plan, None)  # no cap: anything goes
    with pytest.raises(ConfigError, match="cannot be checked"):
        spending.check_cost_cap(the_plan.model_copy(update={"cost_per_hour_usd": None}), 10)
    assert spending.cost_cap(spec, 20) == 10 and spending.cost_cap(spec, 5) == 5
    ml = ClusterSpec(name="m", provider="azureml", sku="h100", nodes=2, region="eastus")
    assert spending.plan_summary(plan(ml), ml).endswith("scales to 0 nodes after 900 s idle")


def test_extend_moves_the_tags_and_status_shows_the_time_left(fake, wired, capsys):
    import json
    _, path = wired
    assert run_cli("up", "-f", str(path), "--yes") == 0
    capsys.readouterr()
    assert run_cli("status", "--json") == 0  # unnamed: no node probe (the fake head IP is not ours)
    before = json.loads(capsys.readouterr().out)["expires_in_s"]["spend"]
    assert 6 * 3600 - 120 < before <= 6 * 3600
    assert run_cli("extend", "spend", "--hours", "2") == 0
    assert "now expires at" in capsys.readouterr().out
    tags = {r["tags"]["azbench-expires"] for r in fake.resources.values() if "tags" in r}
    assert len(tags) == 1
    assert run_cli("status", "--json") == 0  # unnamed: no node probe (the fake head IP is not ours)
    after = json.loads(capsys.readouterr().out)
    assert after["clusters"][0]["properties"]["expires"] == tags.pop()
    assert 8 * 3600 - 120 < after["expires_in_s"]["spend"] <= 8 * 3600
    assert run_cli("status") == 0
    shown = capsys.readouterr().out  # at 100 columns the header "expires in" may wrap
    assert "expires" in shown and re.search(r"\b[78]h \d\dm\b", shown), shown


def test_extend_refuses_clusters_without_an_expiry(azbench_home):
    up = azbench("up", "--provider", "fake", "--name", "free", "--sku", "h100", "--nodes", "1", home=azbench_home)
    assert up.code == 0, up.err
    result = azbench("extend", "free", "--hours", "1", home=azbench_home)
    assert result.code == 2 and "has no expiry to extend" in one_line_error(result)
    bad = azbench("extend", "free", "--hours", "-1", home=azbench_home)
    assert bad.code == 2 and "--hours: must be between 0.25 and 168, got -1" in one_line_error(bad)
