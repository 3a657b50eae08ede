"""The fake backend: Azure-shaped plans and clusters kept in a JSON file, with failure switches."""

from orchestrator.clusters.providers.fake.provider import FakeProvider

__all__ = ["FakeProvider"]
