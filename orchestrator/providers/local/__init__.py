"""The local backend: a real multi-node Slurm cluster emulated on this machine (provider.py),
its records (cluster.py: state.json and the Cluster built from it), and its daemons started
and stopped by pid (proc.py)."""

from orchestrator.providers.local.provider import (
    INSTALL_HINT,
    LocalProvider,
    find_binaries,
    kill_node,
    load_state,
    node_states,
    restart_node,
)

__all__ = ["LocalProvider", "kill_node", "restart_node", "find_binaries", "node_states", "load_state",
           "INSTALL_HINT"]
