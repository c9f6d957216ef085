"""Which availability_slots a session may use: the one --schema names, else the one migrate
recorded; a temporary table, a table the search_path finds instead of the adopted one, or a
decoy beside the worker's own tables is refused, naming both and how to point at the right one."""

from __future__ import annotations

from slot_expiration.schema.location import SlotTableIdentity


def identity(**given: object) -> SlotTableIdentity:
    found: dict[str, object] = {
        "found_in": "public",
        "on_search_path": True,
        "schemas_elsewhere": (),
        "worker_schema": "public",
        "records_schema": True,
        "worker_schemas_elsewhere": (),
        "search_path": '"$user", public',
        "role": "calendar",
        "recorded_in": "public",
    }
    return SlotTableIdentity(**{**found, **given})  # type: ignore[arg-type]


def test_the_table_migrate_recorded_is_used() -> None:
    assert identity().refusal(requested=False) is None


def test_nothing_recorded_yet_is_no_reason_to_refuse() -> None:
    assert identity(records_schema=False, recorded_in=None).refusal(requested=False) is None


def test_no_table_on_the_search_path_is_left_to_the_callers_own_error() -> None:
    assert identity(found_in=None).refusal(requested=False) is None


def test_another_table_than_the_recorded_one_is_refused_naming_both() -> None:
    refusal = identity(found_in="decoy", search_path="decoy, public").refusal(requested=False)

    assert refusal is not None
    assert str(refusal) == (
        "the search_path (decoy, public) finds decoy.availability_slots, but migrate "
        "adopted public.availability_slots: point every command at it with --schema public "
        "(SLOT_EXPIRATION_SCHEMA), or the URL's options=-csearch_path%3Dpublic, or ALTER ROLE "
        "calendar SET search_path = public; nothing changed"
    )


def test_the_schema_the_options_name_wins_over_the_record() -> None:
    # The calendar's schema renamed: --schema names its new name.
    assert identity(found_in="cal", recorded_in="calendar").refusal(requested=True) is None


def test_a_temporary_table_is_refused_even_where_the_schema_is_named() -> None:
    refusal = identity(found_in="pg_temp_3", on_search_path=False).refusal(requested=True)

    assert refusal is not None
    assert str(refusal).startswith("availability_slots is the temporary table pg_temp_3.")


def test_a_decoy_beside_the_worker_tables_elsewhere_is_refused_migrate_told_how_to_adopt() -> None:
    decoy = identity(
        worker_schema=None,
        records_schema=False,
        recorded_in=None,
        worker_schemas_elsewhere=("calendar",),
    )

    worker = decoy.refusal(requested=False)
    migrate = decoy.refusal(requested=False, adopting=True)
    asked = decoy.refusal(requested=True, adopting=True)

    assert worker is not None
    assert migrate is not None
    assert "the worker's tables are in schema calendar" in str(worker)
    assert "to adopt" not in str(worker)
    assert "run migrate with --schema public; nothing changed" in str(migrate)
    assert asked is None  # --schema public: adopting it is what was asked


def test_no_table_on_the_search_path_but_one_elsewhere_says_how_to_point_at_it() -> None:
    found = identity(found_in=None, schemas_elsewhere=("calendar",), worker_schema=None)

    elsewhere = found.elsewhere()

    assert elsewhere is not None
    assert str(elsewhere).startswith(
        'availability_slots is not on the search_path ("$user", public) but in schema calendar'
    )
    assert identity().elsewhere() is None
