"""What the two Azure backends (azure/, azureml/) share, so that neither imports the other:
ARM endpoints (endpoints.py), credentials and sign-in (signin.py), ARM error classes and the
error mapping (errors.py), the throttle (retry) policy (throttle.py) and the tags azbench writes
(tags.py). Imports azure.* only inside functions. Not a backend: the registry does not list it.
"""
