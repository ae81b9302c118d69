"""The packages of the distribution, found rather than listed (the rest is in pyproject.toml).

pyproject.toml alone cannot say this: automatic discovery refuses a flat layout with several
top-level folders, and a ``find`` directive cannot add ``templates/``, which ships as
``pipeline.templates`` (``package-dir`` there). A subpackage added under ``pipeline/`` or
``subscribers/`` is found here without anyone remembering to name it.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pipeline", "pipeline.*", "subscribers", "subscribers.*"]),
                "pipeline.templates"])
