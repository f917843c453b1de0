"""Registers reap-collectors-mp with reap's plugin manager."""
