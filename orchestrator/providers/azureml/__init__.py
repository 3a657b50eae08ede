"""The azureml backend: an AmlCompute cluster in an existing workspace (provider.py), its
Cluster record (cluster.py: one to_cluster for up and describe, and the provisional one) and the
launcher that runs attempts as Azure ML command jobs (launcher.py), both through azure-ai-ml."""

from orchestrator.providers.azureml.provider import AzureMLProvider

__all__ = ["AzureMLProvider"]
