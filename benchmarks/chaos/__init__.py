"""Chaos for `ablate run`: kills at fixed points (`kill_at`), the stored study checked against its design (`check`),
and `python -m benchmarks.chaos`, seeded kills and outages of MLflow, PostgreSQL and the disk."""
