"""The issue as records: feed bytes → reviews → ranked items → the bilingual ``Issue``.

Here live the steps of a build that decide *what* the week says: reading a feed's entries
(``collect``, with ``feed_cut`` and ``feed_date`` guarding feedparser, ``sanitize``
making their HTML safe), ranking them (``rank``, ``verdict`` reading each review's verdict,
``pulls`` for GitHub's facts, ``area_limits`` bounding their areas), filling both languages
(``bilingual``, ``editorial`` for the editor's file, ``translate_guard`` for the machine's),
the readers' areas (``interests``, ``area_display`` for how a name is shown), and the
hand-off written from these records and read back into them (``issue_json``,
``built_issue``). Nothing here renders or sends.
"""
