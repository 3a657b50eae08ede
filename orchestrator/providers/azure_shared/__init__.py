"""What the two Azure backends (azure/, azureml/) share, so that neither imports the other.

Owns, one concept per module: where ARM answers (endpoints.py: PUBLIC_ARM, check_arm_endpoint,
arm_scope), signing in (signin.py: default_credential, signin_call, quiet_sdk_loggers), ARM
failures classified by HTTP status first and mapped to azbench errors (errors.py: arm_call,
is_not_found, is_resumable, ArmErrorClass and its code table, the Azure* errors), the
429 policy within a budget (throttle.py: ThrottleBudget, retry_policy), the tags azbench writes
(tags.py: TAG_*), the ARM connection, its Compute RP client and the Compute RP calls both make (clients.py:
ArmClients, arm_from_config), the Compute RP answers as typed records (records.py: SkuRow, QuotaRow) and the
size and quota checks over them (capacity.py: vm_sizes, sku_problems, quota_problems).
May import: the base, and nothing of azure/ or azureml/. Imports azure.* only inside functions
(and for the type checker). Not a backend: the registry does not list it.
"""
