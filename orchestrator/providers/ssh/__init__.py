"""The ssh backend: adopt an existing Slurm cluster behind an SSH login with a pinned host key
(provider.py); its record, saved locally (cluster.py)."""

from orchestrator.providers.ssh.provider import SshProvider, pin_host_key

__all__ = ["SshProvider", "pin_host_key"]
