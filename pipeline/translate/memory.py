"""The translation memory: accepted translations in one SQLite file in the data folder.

Each result is keyed by the sha256 of the source text, the backend, the model and the target
language: a re-run makes no call and yields identical text, and changing the model translates
afresh.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import OutputError
from pipeline.resource import Resource
from pipeline.translate import MEMORY_FILE

__all__ = ["TranslationMemory", "memory_path"]


def memory_path(settings: Settings) -> Path:
    return settings.resolve(settings.paths.data_dir) / MEMORY_FILE


_SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    source_sha256 TEXT NOT NULL,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    target TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (source_sha256, backend, model, target)
) WITHOUT ROWID
"""


class TranslationMemory(Resource):
    """Accepted translations in one SQLite file (WAL). One connection behind a lock: safe
    across threads. Storage failures raise :class:`OutputError` naming the file."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        """Use :meth:`open`."""
        self.path = path
        self._conn = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str, *, timeout: float = 10.0) -> TranslationMemory:
        """Open, creating the folder, the file and the table if needed."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise OutputError(f"translation memory {path}: cannot open: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise OutputError(f"translation memory {path}: {exc}") from exc
        return cls(path, conn)

    def close(self) -> None:
        """Close the connection (idempotent); every put is already committed."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"TranslationMemory({str(self.path)!r})"

    @staticmethod
    def key(source_text: str) -> str:
        return hashlib.sha256(source_text.encode("utf-8")).hexdigest()

    def get(self, source_text: str, *, backend: str, model: str, target: str) -> str | None:
        rows = self._run("SELECT text FROM translations WHERE source_sha256 = ? "
                         "AND backend = ? AND model = ? AND target = ?",
                         (self.key(source_text), backend, model, target))
        return str(rows[0][0]) if rows else None

    def put(self, source_text: str, text: str, *, backend: str, model: str,
            target: str) -> None:
        self._run("INSERT OR REPLACE INTO translations "
                  "(source_sha256, backend, model, target, text) VALUES (?, ?, ?, ?, ?)",
                  (self.key(source_text), backend, model, target, text))

    def __len__(self) -> int:
        return int(self._run("SELECT count(*) FROM translations", ())[0][0])

    def _run(self, sql: str, params: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """One statement under the lock (autocommit), its rows fetched."""
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise OutputError(f"translation memory {self.path}: {exc}") from exc
