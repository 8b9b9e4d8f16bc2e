"""``fsscope watch``: a running workload's file-system calls, why the slow ones were slow, and
what repeats -- from tracefs alone (no kprobes, no BPF, no hist triggers).

One concern per module, in the order the data flows:

- :mod:`.syscalls`: the calls watched (the ``syscalls`` events), and the kernel events beside them
- :mod:`.tasks`: which tasks are watched (a pid, its children, a cgroup, a command started here)
- :mod:`.session`: the two tracefs instances (the tasks' own events; the device's), their readers
- :mod:`.calls`: entry/exit events paired per thread into call records
- :mod:`.names`: the tree's inode map and the descriptors: which file each call touched
- :mod:`.slow`: a call slow against its own kind on its own file or directory
- :mod:`.causes`: the kernel events inside a slow call's window, as the reason it was slow
- :mod:`.repeats`: what repeats per file and directory, and each format change with its arithmetic
- :mod:`.records`: the report; :mod:`.job`: the job that runs all of it
"""
