"""``scipy.stats``, imported on first attribute access.

Importing ``scipy.stats`` takes about 0.6 s, which every ``certa`` command would pay at start-up (the stage
registry imports every stage module) although only the conformal stages use it. Modules write
``from . import lazy_stats as stats`` and call ``stats.beta.ppf(...)`` as usual (PEP 562 module
``__getattr__``).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from scipy import stats

    return getattr(stats, name)
