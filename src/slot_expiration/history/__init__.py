"""The cycle history: one row per cycle of any replica (store, history.sql), written once a
cycle ended by a sink of its own on a session of its own (sink, housekeeping), read by
`status` and `ui`."""
