"""The ssh backend: adopt an existing Slurm cluster behind an SSH login with a pinned host key.

settings.py is its `ssh:` spec section (required), props.py what its records keep, provider.py
the Provider (connects a SlurmLauncher over an SshRunner), cluster.py its record, saved locally."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.backends import Backend
from orchestrator.providers.ssh.props import SshProps
from orchestrator.providers.ssh.settings import SshSettings
from orchestrator.providers.base import Provider


def _make(progress: Callable[[Any], None] | None = None) -> Provider:
    """A new SshProvider (its module, and paramiko with it, loads only now)."""
    # Lazy: the registry loads this package for every stored ssh cluster (models.props_model:
    # status, report) and spec; provider.py would add ~49 ms to each (python -X importtime, best of 5).
    from orchestrator.providers.ssh.provider import SshProvider
    return SshProvider()


BACKEND = Backend(settings=SshSettings, props=SshProps, make=_make,
                  sku_required=False, section_required=True,
                  section_hint="host, user, key_path, workdir",
                  extra="ssh")
