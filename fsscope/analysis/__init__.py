"""Pure analysis functions on numpy arrays: no I/O, no UI, no file-system calls."""
