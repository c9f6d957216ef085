"""The schema: `migrate` and its migrations (only ever adding), the calendar's table contract
and where the table lives (contract.sql, location), the schema's revision (version), and the
grants of the worker's least-privileged roles (grants)."""
