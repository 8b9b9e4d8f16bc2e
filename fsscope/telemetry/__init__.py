"""Measurements taken beside a job: device counters, CPU, memory, per-task delays.

Nothing here drives I/O; it only observes, from a thread of the job process, so the numbers
can be lined up with a workload's windows afterwards.
"""
