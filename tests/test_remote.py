"""LocalRunner, and SshRunner against a real OpenSSH sshd on 127.0.0.1 (tests/fixtures/sshd.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.hosts.remote import LocalRunner, SshRunner, command_line
from orchestrator.errors import ConfigError, RemoteError
from orchestrator.models import SshTarget

NASTY = "a b;$(touch /tmp/pwned-azbench)'\"`x`\n\\"


def _target(sshd, **overrides) -> SshTarget:
    fields = dict(host=sshd.host, port=sshd.port, user=sshd.user, key_path=sshd.client_key,
                  known_hosts=sshd.known_hosts)
    return SshTarget(**{**fields, **overrides})


def _tree(root: Path) -> Path:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.sh").write_text("#!/bin/sh\necho b\n")
    (root / "sub" / "b.sh").chmod(0o755)
    (root / "sub" / "deeper" / "c.bin").write_bytes(bytes(range(256)) * 100)
    return root


def _same_tree(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files)


# -- LocalRunner ------------------------------------------------------------------------------

def test_local_runner_exit_code_streams_and_env():
    runner = LocalRunner({"AZB_VALUE": NASTY})
    res = runner.run('printf %s "$AZB_VALUE"; echo oops >&2; exit 3')
    assert (res.exit_code, res.stdout, res.stderr) == (3, NASTY, "oops\n")
    assert not Path("/tmp/pwned-azbench").exists()


def test_local_runner_sequence_is_quoted():
    res = LocalRunner().run(["printf", "%s|", "a b", "$(echo no)"])
    assert res.ok and res.stdout == "a b|$(echo no)|"


def test_local_runner_timeout_kills_the_command():
    with pytest.raises(RemoteError, match="timed out after 0.3 s"):
        LocalRunner().run("sleep 30 & sleep 30", timeout=0.3)


def test_local_runner_put_get_tree(tmp_path):
    src = _tree(tmp_path / "src")
    runner = LocalRunner()
    runner.put(src, str(tmp_path / "remote" / "x"))
    runner.get(str(tmp_path / "remote" / "x"), tmp_path / "back")
    assert _same_tree(src, tmp_path / "back")


def test_command_line_exports_quoted_values_and_rejects_bad_names():
    assert command_line(["echo", "a b"], {"K": "v w"}) == "export K='v w'; echo 'a b'"
    # A bad name is the user's configuration (a spec's env), not an unreachable host: ConfigError.
    with pytest.raises(ConfigError, match="not a valid shell name"):
        command_line("true", {"BAD-NAME": "x"})


# -- SshRunner against the real sshd -----------------------------------------------------------

@pytest.fixture
def ssh(sshd):
    runner = SshRunner(_target(sshd), {"AZB_VALUE": NASTY, "AZB_PLAIN": "plain"}, connect_timeout=5)
    yield runner
    runner.close()



@pytest.mark.integration
def test_ssh_run_exit_codes_and_stderr(ssh):
    ok = ssh.run("echo hello; echo warn >&2")
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, "hello\n", "warn\n")
    assert ssh.run("exit 42").exit_code == 42
    assert ssh.run(["sh", "-c", "exit 7"]).exit_code == 7


@pytest.mark.integration
def test_ssh_env_values_are_quoted_not_executed(ssh):
    res = ssh.run('printf %s "$AZB_VALUE"; printf "|%s" "$AZB_PLAIN"')
    assert res.stdout == NASTY + "|plain"
    assert not Path("/tmp/pwned-azbench").exists()


@pytest.mark.integration
def test_ssh_one_connection_serves_twenty_calls(ssh):
    outputs = [ssh.run(["echo", str(i)]).stdout for i in range(20)]
    assert outputs == [f"{i}\n" for i in range(20)]
    assert ssh.connections_opened == 1


@pytest.mark.integration
def test_ssh_timeout_raises_remote_error(ssh):
    with pytest.raises(RemoteError, match="timed out after 0.5 s"):
        ssh.run("sleep 20", timeout=0.5)
    assert ssh.run("echo still-usable").stdout == "still-usable\n"


@pytest.mark.integration
def test_ssh_put_get_tree_and_file(ssh, tmp_path):
    src = _tree(tmp_path / "src")
    remote = tmp_path / "remote" / "deep" / "tree"
    ssh.put(src, str(remote))
    assert (remote / "sub" / "b.sh").stat().st_mode & 0o777 == 0o755
    ssh.get(str(remote), tmp_path / "back")
    assert _same_tree(src, tmp_path / "back")
    ssh.put(src / "a.txt", str(tmp_path / "one" / "a.txt"))
    ssh.get(str(tmp_path / "one" / "a.txt"), tmp_path / "got" / "a.txt")
    assert (tmp_path / "got" / "a.txt").read_text() == "alpha\n"
    with pytest.raises(RemoteError, match="download of"):
        ssh.get(str(tmp_path / "absent"), tmp_path / "nothing")


@pytest.mark.integration
def test_ssh_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    runner = SshRunner(_target(sshd, known_hosts=empty), connect_timeout=5)
    with pytest.raises(RemoteError) as err:
        runner.run("true")
    assert str(err.value) == (f"host key for [127.0.0.1]:{sshd.port} is not pinned in {empty}: "
                              "refusing to connect")
    assert runner.connections_opened == 0


@pytest.mark.integration
def test_ssh_wrong_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pinned = tmp_path / "known_hosts"
    key = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    pinned.write_text(f"[127.0.0.1]:{sshd.port} {key}\n")
    with pytest.raises(RemoteError, match=r"does not match the pinned key \(possible "
                                          r"man-in-the-middle\): refusing to connect"):
        SshRunner(_target(sshd, known_hosts=pinned), connect_timeout=5).run("true")


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_ssh_unreachable_port_is_a_one_line_remote_error(sshd, tmp_path):
    from testsupport.sshd import free_port
    port = free_port()
    runner = SshRunner(_target(sshd, port=port), connect_timeout=2, connect_attempts=2)
    with pytest.raises(RemoteError) as err:
        runner.run("true")
    message = str(err.value)
    assert message.startswith(f"cannot reach ssh://{sshd.user}@127.0.0.1:{port}: ")
    assert "\n" not in message


@pytest.mark.integration
def test_ssh_reconnects_after_sshd_restart(sshd):
    runner = SshRunner(_target(sshd), connect_timeout=5)
    try:
        assert runner.run("echo before").stdout == "before\n"
        sshd.restart()
        assert runner.run("echo after").stdout == "after\n"
        assert runner.connections_opened == 2
    finally:
        runner.close()
