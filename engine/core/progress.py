"""Progress lines of long operations (a run's stages, ``certa verify``, reports): ``throttled_progress`` turns a
``progress(done, total, label)`` callback into at most one line a second, without importing the interpreter (and
the statistics it loads) where only a line is printed."""

from __future__ import annotations

import time
from collections.abc import Callable

from certa.engine.core.stages.base import Progress

__all__ = ["Notify", "throttled_progress"]

Notify = Callable[[str], None]


def throttled_progress(notify: Notify, prefix: str, every_seconds: float = 1.0) -> Progress:
    """A ``progress(done, total, label)`` that notifies "{prefix}{label} {done}/{total}" at most once every
    ``every_seconds``, and at the end."""
    last = [0.0]

    def progress(done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= every_seconds:
            last[0] = now
            notify(f"{prefix}{label} {done}/{total}")

    return progress
