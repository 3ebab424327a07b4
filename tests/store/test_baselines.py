"""Named gate baselines: saving a name again keeps the older version, a name reads its latest,
and an unknown name says which names exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.store.baselines import BaselineStore


def test_versions_are_kept_and_the_latest_wins(tmp_path: Path):
    store = BaselineStore(tmp_path / "s.db")
    try:
        first = store.save("prod", {"v": 1})
        store.save("canary", {"v": 9})
        second = store.save("prod", {"v": 2})
        assert second > first
        assert store.get("prod").doc == {"v": 2}
        assert store.names() == ["prod", "canary"]
        assert [(s.name, s.doc["v"]) for s in store.latest()] == [("prod", 2), ("canary", 9)]
        n = store._conn.execute("SELECT COUNT(*) FROM gate_baselines WHERE name='prod'").fetchone()
        assert n == (2,)  # nothing overwritten
        with pytest.raises(InputError, match=r"no gate baseline named 'staging'.*prod, canary"):
            store.get("staging")
    finally:
        store.close()
