"""Progress lines for a run whose output is not a terminal (a CI log, ``> log``): pytest then
shows no live "collecting ..." counter and no elapsed time, and building the op table's cases
(tracing every sample) keeps collection silent for minutes. Every ``EVERY_SECONDS`` a line says
how far collection or the run has got."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

EVERY_SECONDS = 60.0


class ProgressLog:
    def __init__(self, config: pytest.Config):
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.writer = config.get_terminal_writer()
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        self.start = self.last = time.monotonic()
        self.total = self.done = 0

    def note(self, what: str) -> None:
        """Writes ``what`` (with the time elapsed) if the last line is ``EVERY_SECONDS`` old."""
        now = time.monotonic()
        if now - self.last < EVERY_SECONDS:
            return
        self.last = now
        minutes, seconds = divmod(int(now - self.start), 60)
        # Collection runs with output captured, as live logging does, past the capture.
        with self.capture.global_and_fixture_disabled():
            if self.writer.width_of_current_line:  # a line of -q's dots
                self.writer.line()
            self.reporter.write_line(f"[progress] {what}, {minutes}:{seconds:02d} elapsed")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    def pytest_runtest_logfinish(self) -> None:
        self.done += 1
        self.note(f"{self.done}/{self.total} tests done")


def progress_note(config: pytest.Config) -> Callable[[str], None]:
    """``ProgressLog.note`` of the run; a no-op when the output is a terminal (pytest's own display
    suffices)."""
    log = config.pluginmanager.get_plugin("fastonnx-progress-log")
    return log.note if log is not None else lambda what: None


def register(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not reporter.isatty:
        config.pluginmanager.register(ProgressLog(config), "fastonnx-progress-log")
