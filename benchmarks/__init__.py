"""The benchmark (`./scripts/bench`): the worker measured against the bare SQL floor, beside a
real booking load (pgbench), with several processes, on growing tables, and its memory."""
