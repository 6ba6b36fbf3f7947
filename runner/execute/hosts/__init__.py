"""Hosts: a session in, an observed transcript out. See runner.execute.hosts.base for the interface."""
