"""Test harnesses for tfboot's integration tests (stdlib only).

``harness.netns`` simulates a Kubernetes cluster network (pods, cluster DNS) with Linux network
namespaces, a bridge and a real dnsmasq; see its module docstring.
"""
