"""Registers reap-value with reap's plugin manager."""
