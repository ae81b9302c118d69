"""vLLM PR Weekly: the weekly job, one module per stage, adapters at the edges.

collect → rank → bilingual → render → issue.json (build); later stages read issue.json.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
