"""Hosts: how commands and files reach one machine of a cluster. LocalRunner (this machine)
and SshRunner (paramiko, host keys pinned: an unknown or changed key is refused), both `seams.Runner`
(remote.py).
May import: the base only.
Exposes: remote (LocalRunner, SshRunner, command_line).
"""
