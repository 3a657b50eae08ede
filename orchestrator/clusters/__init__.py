"""Clusters: the use cases of a cluster's life, over any backend.

Owns up/down/status/extend/resize/replace/sweep and `connect` (lifecycle.py: plan, store the
PROVISIONING record, call the provider, record the outcome; beside it cost.py, the list-price
rates, status.py, what `status` says, and resizing.py, resize's plan and rollback), the
spending guards (spending.py: the confirmation summary and the cost cap), and the head-node
shell of `azbench ssh` (shell.py).
Reaches backends only through the providers registry (`providers.get_provider(name)`), and asks
a provider for its parts, never its name.
May import: the base, specs/, hardware/, hosts/, providers/ (the registry and base.py only) and store/.
Exposes: lifecycle (up, down, connect, cluster_status, sweep, ...), spending, shell.
"""
