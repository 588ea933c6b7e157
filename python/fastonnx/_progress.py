"""Progress bars for long exports: shown on a terminal once an export has run about two
seconds, never when ``verbose=False`` or when stderr is not a terminal (CI logs, pipes)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

# An export shorter than this shows no bar at all.
SHOW_AFTER_SECONDS = 2.0


class Progress:
    def __init__(self, verbose: bool | None):
        self.enabled = verbose is not False and sys.stderr.isatty()
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, desc: str, total: int, unit: str = "it", scale: bool = False) -> Iterator[Callable[[int], None]]:
        """Yields ``advance(n)``; the bar appears only once the export has run SHOW_AFTER_SECONDS."""
        if not self.enabled:
            yield lambda n: None
            return
        from tqdm import tqdm

        delay = max(0.0, SHOW_AFTER_SECONDS - (time.perf_counter() - self.started))
        with tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, delay=delay, leave=False) as bar:
            yield bar.update
