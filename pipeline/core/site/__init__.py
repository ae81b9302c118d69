"""The public archive's pages, decided from built issues: each issue's page, the index and
the Atom feed (``site``), the pages across issues, per PR and per area (``site_pages``), and
what the search indexes and where its bundles go (``search``). Values out
(``SiteObject``); the stage that writes them is ``stages/publish.py``.
"""
