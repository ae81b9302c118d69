"""The issue as records: feed bytes → reviews → ranked items → the bilingual ``Issue``.

The steps of a build that decide *what* the week says (docs/architecture.md maps them), and
the ``issue.json`` hand-off. Nothing here renders or sends.
"""
