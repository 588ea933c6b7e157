"""Progress bars for long exports: shown on a terminal once an export has run about two
seconds, never when ``verbose=False`` or when stderr is not a terminal (CI logs, pipes)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

# An export shorter than this shows no bar at all.
SHOW_AFTER_SECONDS = 2.0


class Bar:
    """A stage's bar, or nothing when bars are off: ``advance(n)``; ``set_total(n)`` for a total
    learnt once the stage has begun (the bytes a write will hold, known once it has laid out the
    files)."""

    def __init__(self, bar=None):
        self._bar = bar

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()


class Progress:
    def __init__(self, verbose: bool | None):
        self.enabled = verbose is not False and sys.stderr.isatty()
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, desc: str, total: int | None, unit: str = "it", scale: bool = False) -> Iterator[Bar]:
        """The stage's bar, which appears only once the export has run SHOW_AFTER_SECONDS."""
        if not self.enabled:
            yield Bar()
            return
        from tqdm import tqdm

        delay = max(0.0, SHOW_AFTER_SECONDS - (time.perf_counter() - self.started))
        with tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, delay=delay, leave=False) as bar:
            yield Bar(bar)
