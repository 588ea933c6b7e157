"""Progress bars for long exports: shown on a terminal once an export has run about two
seconds, never when ``verbose=False`` or when stderr is not a terminal (CI logs, pipes). A phase
with no count to show (tracing) is a spinner with its name and the time it has taken."""

from __future__ import annotations

import contextlib
import sys
import threading
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

    @contextlib.contextmanager
    def phase(self, desc: str) -> Iterator[None]:
        """A spinner for a phase that reports no progress of its own (torch.export's trace): the
        phase's name and its elapsed time, redrawn by a thread, erased when the phase ends."""
        if not self.enabled:
            yield
            return
        stop = threading.Event()
        thread = threading.Thread(target=_spin, args=(desc, stop, self.started), daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


_FRAMES = "|/-\\"


def _spin(desc: str, stop: threading.Event, export_started: float) -> None:
    """Draws ``desc`` with a turning bar on stderr until ``stop``; nothing before the export has
    run SHOW_AFTER_SECONDS."""
    started, frame, drawn = time.perf_counter(), 0, False
    while not stop.wait(0.25):
        if time.perf_counter() - export_started < SHOW_AFTER_SECONDS:
            continue
        elapsed = time.perf_counter() - started
        sys.stderr.write(f"\r{desc} {_FRAMES[frame % len(_FRAMES)]} {elapsed:.0f} s")
        sys.stderr.flush()
        frame, drawn = frame + 1, True
    if drawn:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
