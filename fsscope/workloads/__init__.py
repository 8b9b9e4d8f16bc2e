"""Workloads: plain functions that take a mounted path and a spec and measure; no UI."""
