"""Requests per command (issue 39, point 10), counted at the fake ARM with the sign-in included:
the real CLI in a subprocess, DefaultAzureCredential against the fake's identity endpoint. One
sign-in per command (one token request), one listing of each kind. Before this issue `up` of
2 x H100 took 42 requests (two sign-ins), its immediate rerun 23 and `down` 14."""

from __future__ import annotations

from collections import Counter

from tests.cli_helpers import azbench

SPEC = """name: cnt
provider: azure
sku: h100
nodes: 2
region: eastus
azure:
  boot_timeout_s: 0
  polling_interval: 0.2
"""


def _counted(fake, env, home, *args: str) -> tuple[int, Counter[str]]:
    mark = fake.mark()
    done = azbench(*args, home=home, env=env)
    assert done.code == 0, done.err
    seen = fake.since(mark)
    kinds = Counter("token" if e.path.endswith("/token") else "openid" if e.sign_in else
                    f"{e.method} {'/'.join(e.path.rsplit('/', 2)[-2:])}" for e in seen)
    return len(seen), kinds


def test_up_rerun_and_down_stay_within_their_request_budgets(tls_principals, tmp_path):
    fake, env = tls_principals
    spec = tmp_path / "cnt.yaml"
    spec.write_text(SPEC)
    home = tmp_path / "alice"
    up, up_kinds = _counted(fake, env["alice"], home, "up", "-f", str(spec), "--yes")
    rerun, rerun_kinds = _counted(fake, env["alice"], home, "up", "-f", str(spec), "--yes")
    down, down_kinds = _counted(fake, env["alice"], home, "down", "cnt", "--yes")
    for kinds in (up_kinds, rerun_kinds, down_kinds):
        assert kinds["token"] == 1, kinds  # one sign-in per command
        # one listing of each kind: groups by tag, resources by tag, one group's contents
        assert max((n for k, n in kinds.items() if k.endswith(("/resourcegroups", "/resources"))), default=0) <= 1, kinds
    print(f"requests, sign-in included: up {up}, rerun {rerun}, down {down}")
    assert up <= 36 and rerun <= 15 and down <= 10, (up, rerun, down, up_kinds, rerun_kinds, down_kinds)
    assert not [k for k in fake.resources if "azbench-cnt" in k or "/roledefinitions/" in k]
