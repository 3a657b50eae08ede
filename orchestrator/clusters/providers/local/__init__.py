"""The local backend: a real multi-node Slurm cluster emulated on this machine (provider.py),
with its daemons started and stopped by pid (proc.py)."""

from orchestrator.clusters.providers.local.provider import (
    INSTALL_HINT,
    LocalProvider,
    find_binaries,
    kill_node,
    node_states,
    restart_node,
)

__all__ = ["LocalProvider", "kill_node", "restart_node", "find_binaries", "node_states", "INSTALL_HINT"]
