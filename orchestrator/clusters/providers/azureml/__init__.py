"""The azureml backend: an AmlCompute cluster in an existing workspace (provider.py) and the
launcher that runs attempts as Azure ML command jobs (launcher.py), both through azure-ai-ml."""

from orchestrator.clusters.providers.azureml.provider import AzureMLProvider

__all__ = ["AzureMLProvider"]
