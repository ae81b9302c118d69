""":class:`~subscribers.store.Interests` on SQLite: the readers' distinct choices, and the
add-only ``area_catalog`` table."""

from __future__ import annotations

from collections.abc import Iterable

from subscribers.store.rules import catalog_names, decode_areas
from subscribers.store.sqlite.core import SqliteCore


class SqliteInterests(SqliteCore):
    """The variants to render and the catalog of areas."""

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """Stored areas are canonical text, so equal choices group in one DISTINCT."""
        with self._using() as conn:
            rows = conn.execute("SELECT DISTINCT layout, areas FROM subscribers "
                                "WHERE status = 'active' AND areas != ''").fetchall()
        return sorted({(row[0], areas) for row in rows if (areas := decode_areas(row[1]))})

    def known_areas(self) -> tuple[str, ...]:
        with self._using() as conn:
            rows = conn.execute("SELECT name FROM area_catalog ORDER BY name").fetchall()
        return tuple(row[0] for row in rows)

    def note_areas(self, names: Iterable[str]) -> None:
        cleaned = sorted(catalog_names(names))
        if not cleaned:
            return
        with self._transaction() as conn:
            conn.executemany("INSERT INTO area_catalog (name) VALUES (?) "
                             "ON CONFLICT (name) DO NOTHING", [(name,) for name in cleaned])
