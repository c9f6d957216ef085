"""Where the calendar's availability_slots is, when the search_path misses it.

Every statement of the product names availability_slots unqualified: the
session's search_path decides which one it is. A command that finds none asks
here, once, whether another schema of the database holds one, to say how to
point at it instead of offering `migrate` (which never creates a second one).
"""

from __future__ import annotations

import psycopg

from slot_expiration.store.errors import SlotTableElsewhereError, StoreError
from slot_expiration.store.session import ApplicationName, connect_sync
from slot_expiration.store.statements import query


def slot_table_elsewhere(database_url: str) -> SlotTableElsewhereError | None:
    """The schemas holding the availability_slots the search_path misses, as the error
    that says how to point at them; None when there is none (or it cannot be told: the
    caller's own error stands then)."""
    try:
        with connect_sync(database_url, ApplicationName.ADMIN, autocommit=True) as session:
            found = session.execute(query("slot_table_elsewhere")).fetchone()
    except (StoreError, psycopg.Error):
        return None
    if found is None or not found[0]:
        return None
    schemas, search_path, role = found
    return SlotTableElsewhereError(schemas, search_path, role)
