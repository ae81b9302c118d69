""":class:`~subscribers.store.Interests` on DynamoDB: the readers' choices from one Query of
the ``by_status`` index, and the catalog as one string-set item (``catalog#areas``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from subscribers.store.dynamo.core import DynamoCore
from subscribers.store.dynamo.items import CATALOG_KEY, expression, pk_of
from subscribers.store.dynamo.tables import STATUS_INDEX
from subscribers.store.rules import catalog_names, decode_areas

if TYPE_CHECKING:

    pass

__all__ = ["DynamoInterests"]

class DynamoInterests(DynamoCore):
    """The variants to render and the catalog of areas."""

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """The distinct (layout, areas) of active subscribers who follow any area, sorted.

        One paginated Query of the ``by_status`` index for ``active``, reading only layout
        and areas of the subscribers that have areas (the attribute is absent for none).
        The index is eventually consistent: a choice changed a moment ago may not count yet.
        """
        projection = "#layout, #areas"
        condition = "#status = :status"
        having = "attribute_exists(#areas)"
        choices: set[tuple[str, tuple[str, ...]]] = set()
        for page in self._pages(self.subscribers_table, "query",
                                TableName=self.subscribers_table, IndexName=STATUS_INDEX,
                                KeyConditionExpression=condition, FilterExpression=having,
                                ProjectionExpression=projection,
                                **expression(projection, condition, having,
                                              status="active")):
            for item in page:
                areas = decode_areas(item.get("areas"))
                if areas:
                    choices.add((item["layout"], areas))
        return sorted(choices)

    def known_areas(self) -> tuple[str, ...]:
        """Every area in the catalog item, sorted (one strongly consistent read)."""
        item = self._get(self.subscribers_table, pk_of(CATALOG_KEY))
        return tuple(sorted(item.get("names", ()))) if item else ()

    def note_areas(self, names: Iterable[str]) -> None:
        """Add the names to the catalog item: one ``ADD`` to its string set, atomic and
        add-only, so two publishers at once both land. (An item holds 400 KB: some
        thousands of names of at most 60 characters.)"""
        cleaned = catalog_names(names)
        if cleaned:
            self._update(self.subscribers_table, pk_of(CATALOG_KEY), "ADD #names :names", None,
                         names=cleaned)
