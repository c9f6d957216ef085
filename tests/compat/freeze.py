"""At a release: freeze the product's statements (every `.sql` file of the packages
db.statements.SQL_PACKAGES names) as released/ (the next release's migrations must leave them
working). Run after the CHANGELOG names the release:

    .venv/bin/python -m tests.compat.freeze
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from slot_expiration.db.statements import SQL_PACKAGES
from tests.compat.statements import RELEASED

REPOSITORY = Path(__file__).resolve().parents[2]
PACKAGE = REPOSITORY / "src" / "slot_expiration"


def freeze() -> str:
    with (REPOSITORY / "pyproject.toml").open("rb") as file:
        version = str(tomllib.load(file)["project"]["version"])
    for old in RELEASED.glob("*.sql"):
        old.unlink()
    for package in SQL_PACKAGES:
        for source in sorted((PACKAGE / package.split(".")[-1]).glob("*.sql")):
            shutil.copyfile(source, RELEASED / source.name)
    (RELEASED / "RELEASE").write_text(f"{version}\n", encoding="utf-8")
    return version


if __name__ == "__main__":
    print(f"froze the product's statements of {freeze()} in {RELEASED}")
