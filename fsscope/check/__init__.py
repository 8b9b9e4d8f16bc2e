"""``fsscope check``: what on this machine will distort a storage benchmark, and how many runs
of what length a trustworthy result needs.

- :mod:`.findings`  one finding (id, severity, title, evidence, effect, fix) and their ranking
- :mod:`.system`    pure readers of machine-wide state over a /proc + /sys + /etc root
- :mod:`.target`    pure readers of the target's file system and devices; other I/O
- :mod:`.audit`     all readers with one counter sample; the fast subset for ``bench``
- :mod:`.verdict`   fit / caution / unfit from findings and calibration
- :mod:`.job`       the ``check`` job (audit + calibration runs in the job child)
"""
