"""The fake backend: Azure-shaped plans (provider.py) and clusters kept in a JSON file
(cluster.py), with failure switches."""

from orchestrator.providers.fake.provider import FakeProvider

__all__ = ["FakeProvider"]
