"""Azure region names for spec validation; a typo gets a one-line error with a suggestion.

Offline on purpose: preflight asks Azure which sizes each region really offers; this list only
catches misspellings before any network call.
"""

from __future__ import annotations

import difflib

from orchestrator.errors import ConfigError

AZURE_REGIONS: frozenset[str] = frozenset("""
australiacentral australiacentral2 australiaeast australiasoutheast austriaeast belgiumcentral
brazilsouth brazilsoutheast canadacentral canadaeast centralindia centralus centraluseuap
chilecentral eastasia eastus eastus2 eastus2euap francecentral francesouth germanynorth
germanywestcentral indonesiacentral israelcentral italynorth japaneast japanwest jioindiacentral
jioindiawest koreacentral koreasouth malaysiawest mexicocentral newzealandnorth northcentralus
northeurope norwayeast norwaywest polandcentral qatarcentral southafricanorth southafricawest
southcentralus southeastasia southindia spaincentral swedencentral swedensouth switzerlandnorth
switzerlandwest uaecentral uaenorth uksouth ukwest westcentralus westeurope westindia westus
westus2 westus3 usgovarizona usgovtexas usgovvirginia chinaeast2 chinaeast3 chinanorth3
""".split())


def check_region(region: str) -> str:
    """Return the normalised region name or raise ConfigError naming the closest one."""
    name = region.strip().lower().replace(" ", "")
    if name in AZURE_REGIONS:
        return name
    close = difflib.get_close_matches(name, sorted(AZURE_REGIONS), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else "use an Azure region name such as 'eastus'"
    raise ConfigError(f"unknown region '{region}'", hint=hint)
