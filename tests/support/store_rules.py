"""The ledger's rules and a confirmation's, state by state, as plain functions: what
tests/test_store.py holds both store backends to (each writes them in its own storage's terms:
SQL statements, DynamoDB conditions)."""

from __future__ import annotations

from dataclasses import dataclass

from subscribers.store.rules import CONFIRMABLE


def after_confirmation(status: str) -> str:
    """The status a confirmation link leaves."""
    return "active" if status == CONFIRMABLE else status


@dataclass(frozen=True)
class LedgerRow:
    """What the ledger's rules read and write of one row; ``status`` None: no row yet."""

    status: str | None = None
    permanent: bool = False
    attempts: int = 0


def after_claim(row: LedgerRow, *, retry: bool = False,
                retry_temporary: bool = False) -> LedgerRow | None:
    """The row :meth:`~subscribers.store.Ledger.claim` leaves, or None when it is refused."""
    if row.status is None:
        return LedgerRow("sending", False, 1)
    temporary = row.status == "failed" and not row.permanent
    if (retry and (row.status == "unconfirmed" or temporary)) or (retry_temporary
                                                                  and temporary):
        return LedgerRow("sending", False, row.attempts + 1)
    return None


def after_outcome(row: LedgerRow, status: str, *, permanent: bool = False) -> LedgerRow:
    """The row ``mark_sent``, ``mark_failed`` or ``mark_unconfirmed`` leaves: recorded whatever
    the row said, but a ``sent`` row is never downgraded; a row written without a claim counts
    one attempt."""
    if row.status == "sent" and status != "sent":
        return row
    return LedgerRow(status, permanent and status == "failed", row.attempts or 1)


def after_release(row: LedgerRow) -> LedgerRow:
    """A ``sending`` claim is dropped (no row); any other row stays."""
    return LedgerRow() if row.status == "sending" else row
