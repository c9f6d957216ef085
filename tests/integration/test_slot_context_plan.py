"""The slot context's reads are served by the indexes of migration 0003 on a large table."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db.statements import query
from slot_expiration.domain import SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.slots import BOOKABLE, OCCUPYING, WORKING_VIEW
from slot_expiration.slots.store import EARLIEST, LATEST
from tests.conftest import scratch_database
from tests.support.slots import AS_OF

pytestmark = pytest.mark.integration

# 20 agencies of 20 consultants, 500 slots each, one a minute across the table: 125
# days of history (Expired, Booked, Archived) and two weeks of future, mostly
# Available. A consultant's history outweighs their future tenfold; an agency shows
# hundreds of bookable slots.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(),
       ('00000000-0000-0000-0000-' || lpad((i %% 20)::text, 12, '0'))::uuid,
       ('00000000-0000-0000-0001-' || lpad((i %% 400)::text, 12, '0'))::uuid,
       %(as_of)s + (i - 180000) * interval '1 minute',
       %(as_of)s + (i - 180000) * interval '1 minute' + interval '30 minutes',
       CASE WHEN i > 180000
            THEN (ARRAY['Available', 'Available', 'Available', 'Booked'])[1 + i %% 4]
            ELSE (ARRAY['Expired', 'Booked', 'Archived', 'Expired'])[1 + i %% 4] END,
       1, %(as_of)s, %(as_of)s
FROM generate_series(1, 200000) AS i
"""
TENANT = UUID("00000000-0000-0000-0000-000000000007")
CONSULTANT = UUID("00000000-0000-0000-0001-000000000007")


def _statuses(statuses: frozenset[SlotStatus] | set[SlotStatus]) -> list[str]:
    return sorted(status.value for status in statuses)


SHOWCASE = {
    "tenant_id": TENANT,
    "bookable": _statuses(BOOKABLE),
    "earliest_start": AS_OF + timedelta(hours=1),
    "start_before": LATEST,
    "after_start": EARLIEST,
    "after_id": UUID(int=0),
    "limit": 51,
}
LIST = {
    "tenant_id": TENANT,
    "consultant_id": CONSULTANT,
    "start_from": AS_OF - timedelta(days=2),
    "start_before": AS_OF + timedelta(days=2),
    "limit": None,
}

CASES: list[tuple[str, str, dict[str, Any], set[str]]] = [
    ("showcase", "showcase_page", SHOWCASE, {"ix_availability_slots_showcase"}),
    # One consultant's slots are few (the horizon bounds their future): reading them
    # through the index and sorting them is as good as reading them in order.
    (
        "showcase of one consultant",
        "showcase_page_for_consultant",
        SHOWCASE | {"consultant_id": CONSULTANT},
        {"ix_availability_slots_consultant_start", "ix_availability_slots_showcase"},
    ),
    (
        "agent list, working view",
        "consultant_slots",
        LIST | {"statuses": _statuses(WORKING_VIEW)},
        {"ix_availability_slots_consultant_start"},
    ),
    (
        "agent list, history",
        "consultant_slots",
        LIST | {"statuses": _statuses({SlotStatus.EXPIRED, SlotStatus.ARCHIVED})},
        {"ix_availability_slots_consultant_start"},
    ),
    (
        "overlap check of a publication",
        "occupying_slots_in_window",
        {
            "tenant_id": TENANT,
            "consultant_id": CONSULTANT,
            "occupying": _statuses(OCCUPYING),
            "window_start": AS_OF + timedelta(hours=1),
            "window_end": AS_OF + timedelta(days=3),
        },
        {"ix_availability_slots_consultant_occupied_end"},
    ),
]


@pytest.fixture(scope="module")
def large_table(pg_server: EmbeddedPostgres) -> Iterator[psycopg.Connection[Any]]:
    """Filled once for the module: the tests only ask for plans."""
    with (
        scratch_database(pg_server, "plans") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        conn.execute(FILL, {"as_of": AS_OF})
        conn.execute("ANALYZE availability_slots")
        yield conn


def plan_of(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> str:
    """The plan of a named statement, with its parameters bound as the store binds them."""
    explain = sql.SQL("EXPLAIN ") + sql.SQL(query(statement))
    return "\n".join(row[0] for row in conn.execute(explain, params).fetchall())


@pytest.mark.parametrize(
    ("statement", "params", "indexes"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_read_of_the_slot_context_uses_its_index(
    large_table: psycopg.Connection[Any],
    statement: str,
    params: dict[str, Any],
    indexes: set[str],
) -> None:
    plan = plan_of(large_table, statement, params)

    assert any(index in plan for index in indexes), plan
    assert "Seq Scan" not in plan, plan


def test_a_showcase_page_is_read_in_index_order_and_stops_at_its_limit(
    large_table: psycopg.Connection[Any],
) -> None:
    """Keyset pagination: hundreds of bookable slots, yet a page reads only its own rows."""
    plan = plan_of(large_table, "showcase_page", SHOWCASE)
    deep = plan_of(
        large_table,
        "showcase_page",
        SHOWCASE | {"after_start": AS_OF + timedelta(days=10), "after_id": UUID(int=0)},
    )

    for page in (plan, deep):
        assert "Index Scan using ix_availability_slots_showcase" in page, page
        assert "Sort" not in page, page
        assert page.startswith("Limit"), page


@pytest.mark.parametrize("statement", ["book_slot", "transition_slot", "tenant_slot"])
def test_book_archive_and_their_explanation_read_one_row_by_primary_key(
    large_table: psycopg.Connection[Any], statement: str
) -> None:
    params = {
        "id": UUID(int=1),
        "tenant_id": TENANT,
        "sources": _statuses({SlotStatus.AVAILABLE}),
        "target": SlotStatus.BOOKED.value,
        "earliest_start": AS_OF,
        "now": AS_OF,
    }
    plan = plan_of(large_table, statement, params)

    assert "availability_slots_pkey" in plan, plan
    assert "Seq Scan" not in plan, plan
