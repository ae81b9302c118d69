""":class:`~subscribers.store.Interests` on DynamoDB: the readers' choices from one Query of
the ``by_status`` index, and the catalog as one string-set item (``catalog#areas``).
"""

from __future__ import annotations

from collections.abc import Iterable

from subscribers.store.dynamo.core import DynamoCore
from subscribers.store.dynamo.items import CATALOG_KEY, expression, pk_of
from subscribers.store.dynamo.tables import STATUS_INDEX
from subscribers.store.rules import catalog_names, decode_areas


class DynamoInterests(DynamoCore):
    """The variants to render and the catalog of areas."""

    def variant_choices(self) -> list[tuple[str, tuple[str, ...]]]:
        """One Query of ``by_status`` for ``active`` (eventually consistent: a choice changed a
        moment ago may not count yet)."""
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
        item = self._get(self.subscribers_table, pk_of(CATALOG_KEY))
        return tuple(sorted(item.get("names", ()))) if item else ()

    def note_areas(self, names: Iterable[str]) -> None:
        """One ``ADD`` to the catalog item's string set: atomic and add-only, so two publishers
        at once both land."""
        cleaned = catalog_names(names)
        if cleaned:
            self._update(self.subscribers_table, pk_of(CATALOG_KEY), "ADD #names :names", None,
                         names=cleaned)
