"""The plan/treatment engine shared by explore (Chopper, #14) and the variation study (#15).

- :mod:`~fsscope.study.space`    factor spaces in TOML (``recipes/spaces/``), level overrides;
  generic -- a study brings its own schema of factor names and level types.
- :mod:`~fsscope.study.plan`     seeded, balanced Latin Hypercube plans; treatments
  (design row x recipe x repeat); saved as ``plan.json`` before anything runs.
- :mod:`~fsscope.study.execute`  run a plan's treatments through Dask (LocalCluster here,
  ``--scheduler`` for a cluster), rows appended as they arrive, resumable.
- :mod:`~fsscope.study.table`    the treatments table (CSV for pandas).
- explore's parts: :mod:`~fsscope.study.diskstate` (base images, clones),
  :mod:`~fsscope.study.player` (write pattern + FIEMAP), :mod:`~fsscope.study.explore`
  (the treatment and the job). Sensitivity analysis: :mod:`fsscope.analysis.sensitivity`.

Another study plugs in a treatment function: ``run_study(plan, fn, study_dir, ...)`` with
``fn(treatment: dict) -> dict`` importable on the workers (a bench run on a configuration,
for #15), and analyses the rows with the same sensitivity functions. No UI imports here.
"""
