"""The worker's SQL spells its one transition as literals (the planner needs them to use the
index); these tests hold those literals to the state machine's EXPIRE."""

from __future__ import annotations

import re

import pytest

from slot_expiration.db.statements import query
from slot_expiration.domain import EXPIRE, SlotStatus, require_transition

SELECTIONS = ("expire_batch", "lock_batch", "count_backlog_capped", "count_backlog")
TRANSITIONS = ("expire_batch", "expire_slot")


def _quoted_statuses(text: str) -> set[str]:
    values = {status.value for status in SlotStatus}
    return {literal for literal in re.findall(r"'([A-Za-z]+)'", text) if literal in values}


@pytest.mark.parametrize("name", SELECTIONS)
def test_the_worker_selects_only_slots_in_the_source_status_of_expire(name: str) -> None:
    statement = query(name)

    assert re.search(rf"status = '{EXPIRE.source.value}'", statement), statement
    assert _quoted_statuses(statement) <= {EXPIRE.source.value, EXPIRE.target.value}


@pytest.mark.parametrize("name", TRANSITIONS)
def test_the_worker_writes_exactly_the_expire_transition(name: str) -> None:
    statement = query(name)

    sets = re.findall(r"SET status = '(\w+)'", statement)
    guards = re.findall(r"status = '(\w+)'", statement.split("SET", 1)[1])
    assert sets == [EXPIRE.target.value]
    assert EXPIRE.source.value in guards  # re-checked at write time, under the row lock
    require_transition(SlotStatus(guards[-1]), SlotStatus(sets[0]))


@pytest.mark.parametrize("name", TRANSITIONS)
def test_every_write_of_the_worker_moves_version_up_by_one_and_sets_updated_at(
    name: str,
) -> None:
    statement = query(name)

    assert re.search(r"version = (\w+\.)?version \+ 1", statement)
    assert "updated_at = %(as_of)s" in statement
