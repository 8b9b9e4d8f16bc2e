"""Job engine: the registry of jobs, the event protocol and the child-process runner."""
