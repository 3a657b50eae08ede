"""Sign-in failures (issue 21, point 5): one line, exit 3, the SDK's detail in the debug log only.

The CLI runs in a subprocess against the fake ARM over HTTPS, whose identity endpoint refuses a
wrong client secret as Entra ID does (401 invalid_client, AADSTS7000215).
"""

from __future__ import annotations

import pytest

from orchestrator.providers.azure.clients import clients_from_config
from orchestrator.providers.azure_shared.errors import signin_message
from orchestrator.errors import ConfigError
from tests.cli_helpers import azbench, one_line_error

SPEC = """name: s1
provider: azure
sku: h100
nodes: 1
region: eastus
azure: {ssh_ingress_cidr: 203.0.113.7/32, boot_timeout_s: 0, polling_interval: 0.05}
"""


def test_a_wrong_client_secret_is_one_line_and_exit_3(tls_arm, tmp_path):
    fake, env = tls_arm
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC)
    home = tmp_path / "home"
    result = azbench("up", "-f", str(spec), "--yes", home=home, env={**env, "AZURE_CLIENT_SECRET": "wrong"})
    assert result.code == 3, result.err
    log = home / "logs" / "azure-debug.log"
    assert one_line_error(result) == ("azbench: sign-in failed: AADSTS7000215: Invalid client secret provided. "
                                      f"(details in {log})")
    assert [(e.method, e.status) for e in fake.log if "/oauth2/" in e.path] == [("POST", 401)]
    assert [e for e in fake.log if "/oauth2/" not in e.path and "/v2.0/" not in e.path] == []  # never reached ARM
    assert "AADSTS7000215" in log.read_text()  # azure-identity's detail went here, not to the console
    status = azbench("status", "--json", home=home, env=env)
    assert status.code == 0 and '"s1"' not in status.out  # nothing recorded


def test_a_subscription_id_that_is_not_a_guid_is_one_line_and_exit_2(tls_arm, tmp_path):
    fake, env = tls_arm
    result = azbench("sweep", "--dry-run", home=tmp_path / "home", env={**env, "AZURE_SUBSCRIPTION_ID": "not-a-guid"})
    assert result.code == 2
    assert "AZURE_SUBSCRIPTION_ID 'not-a-guid' is not a subscription id" in one_line_error(result)
    assert fake.log == []


def test_the_spec_names_a_bad_subscription_id_as_its_own(monkeypatch):
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "00000000-0000-0000-0000-0000000000aa")
    with pytest.raises(ConfigError, match="azure.subscription_id 'my-sub' is not a subscription id"):
        clients_from_config(subscription_id="my-sub")


def test_the_aadsts_code_and_message_come_out_of_default_azure_credentials_text():
    text = ("DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
            "Attempted credentials:\n\tEnvironmentCredential: Authentication failed: AADSTS7000215: Invalid "
            "client secret provided. Ensure the secret being sent in the request is the client secret value.\n"
            "To mitigate this issue, please refer to the troubleshooting guidelines here at "
            "https://aka.ms/azsdk/python/identity/defaultazurecredential/troubleshoot.")
    assert signin_message(text) == "AADSTS7000215: Invalid client secret provided."
    assert signin_message("ManagedIdentityCredential: no endpoint\nmore") == "ManagedIdentityCredential: no endpoint"
