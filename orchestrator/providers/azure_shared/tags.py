"""The tags azbench writes on what it creates in Azure, and reads back as the truth.

Cloud tags, not the local store, say which cluster a resource belongs to, who owns it and when
it expires (a store is a cache, and a subscription is shared: azure-notes.md §10). The azure
backend tags every resource it creates; the azureml backend tags its AmlCompute.
"""

from __future__ import annotations

TAG_CLUSTER = "azbench-cluster"  # the azbench cluster a resource belongs to
# The owner: on the azure backend, the object id of the principal that signed in (with
# TAG_INSTALL, owner.py); on azureml, the user name the compute was created under.
TAG_OWNER = "azbench-owner"
TAG_INSTALL = "azbench-installation"  # the id of the $AZBENCH_HOME that made the cluster
TAG_EXPIRES = "azbench-expires"  # %Y-%m-%dT%H:%M:%SZ; the head's expiry agent reads it each tick
# When the first `up` created the cluster, and (spot only) how long a restore waits for evicted
# capacity: describe() reads both back from the resource group, like owner and expiry.
TAG_CREATED, TAG_SPOT_RESTORE = "azbench-created", "azbench-spot-restore-s"
# On each scale set: how many instance-id slots (0..n-1) its slurm.conf defines (cloudinit.slot_count).
TAG_SLOTS = "azbench-slots"
# On each GB200 scale set: the VMs per NVL72 rack `up` laid it out with (18, or 16 as Azure's
# record run): resize grows and shrinks in whole racks of it.
TAG_RACK = "azbench-rack-vms"
# On the resource group: the creator nonce, an HMAC only the home that made the cluster can
# compute (azure/owner.py, creator_tag): evidence, with the custom role's createdBy, of who
# created the cluster that no tag writer can forge for another group.
TAG_CREATOR = "azbench-creator"
# On each scale set: the instance ids a shrink parked (deallocated: no compute billed; a grow
# starts them again under the same ids), as a hostlist-style range list ("4-7,12").
TAG_PARKED = "azbench-parked"
# On each scale set: the instance id Azure gives next as far as azbench has seen (one past the
# highest id it ever saw there): a grow knows before it writes whether new VMs would land
# beyond the set's Slurm slots.
TAG_NEXT_ID = "azbench-next-id"
# On each scale set: the most VMs it may hold (azure.max_vms_per_scale_set at `up`, at most the
# 100 of a single placement group unless Azure support raised it): a grow never fills it past.
TAG_MAX_VMS = "azbench-max-vms"
