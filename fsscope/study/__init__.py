"""The plan/treatment engine shared by explore (Chopper, #14) and the variation study (#15):
factor spaces, seeded balanced LHS plans, treatments run locally or on a Dask cluster, and
the treatments table. No UI imports."""
