"""torch's log lines while a model is traced, held back instead of printed.

A trace that fails makes torch log its own traceback (fake tensors log every kernel that failed,
20 lines of ``E...`` before fastonnx's error says the same in one). Those lines belong to the
error: they are attached to it as ``torch_log`` and not printed. A trace that succeeds prints
its warnings as torch would have; the tracebacks of attempts a fallback replaced are dropped,
since the ``TracerFallbackWarning`` says why the attempt failed."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator


class HeldLogs:
    """The records torch's handlers would have written, each with its handler."""

    def __init__(self) -> None:
        self.held: list[tuple[logging.Handler, logging.LogRecord]] = []

    def lines(self) -> list[str]:
        return [record.getMessage() for _, record in self.held]

    def show_warnings(self, unless: Callable[[str], bool] = lambda message: False) -> None:
        """Writes the held records below ERROR through the handlers that held them, except those
        whose message ``unless`` says another warning already gives."""
        for handler, record in self.held:
            if record.levelno < logging.ERROR and not unless(record.getMessage()):
                handler.handle(record)
        self.held.clear()


class _Hold(logging.Filter):
    """On one of torch's handlers (its loggers do not propagate): keeps the record, writes nothing."""

    def __init__(self, handler: logging.Handler, into: HeldLogs):
        super().__init__()
        self.handler, self.into = handler, into

    def filter(self, record: logging.LogRecord) -> bool:
        self.into.held.append((self.handler, record))
        return False


def _torch_handlers() -> list[logging.Handler]:
    loggers = [logging.getLogger("torch")] + [
        logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("torch.") and isinstance(logger, logging.Logger)
    ]
    seen: dict[int, logging.Handler] = {}
    for logger in loggers:
        for handler in logger.handlers:
            seen.setdefault(id(handler), handler)
    return list(seen.values())


@contextlib.contextmanager
def held_torch_logs() -> Iterator[HeldLogs]:
    """Holds torch's log records while the block runs. An ``ExportError`` raised from the block
    carries them as ``torch_log``; otherwise the caller shows them (``show_warnings``) or drops
    them."""
    held = HeldLogs()
    holds = [_Hold(handler, held) for handler in _torch_handlers()]
    for hold in holds:
        hold.handler.addFilter(hold)
    try:
        yield held
    except Exception as e:
        e.torch_log = held.lines()  # type: ignore[attr-defined]
        raise
    finally:
        for hold in holds:
            hold.handler.removeFilter(hold)
