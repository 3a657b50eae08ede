"""Test support: the stateful fakes and real-server helpers that tests/ and benchmarks/ share.

Public on purpose (benchmarks import it; tests/ never is): fake_runner (a scripted Runner with a
call history), fake_arm (an ARM server on loopback for the real Azure SDKs), fake_imds (Azure's
instance metadata service), vm_emulator/vm_guest/vm_shim (VMs as Linux namespaces that boot the
real cloud-init), sshd (a real OpenSSH server on 127.0.0.1). Each fake cites its sources.
"""
