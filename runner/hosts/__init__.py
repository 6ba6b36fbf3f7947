"""Hosts: a session in, an observed transcript out. See runner.hosts.base for the interface."""
