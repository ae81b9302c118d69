"""The public archive's pages, decided from built issues: each issue's page, the index and
the Atom feed (``site``), the pages across issues, per PR and per area (``site_pages``),
what the search indexes (a record a review) and where its bundles go (``search``), and the
words of that index, Chinese cut by jieba (``words``). Values out
(``SiteObject``); the stage that writes them is ``stages/publish.py``.
"""
