"""`slot-expiration ui`: one read-only page, server-rendered, for the on-call engineer."""
