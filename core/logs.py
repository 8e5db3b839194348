"""Log lines as ``[logging]`` asks: text or JSON, each line of a request carrying its request id and
workspace, so one request's lines can be found together (``X-Request-Id`` is the same id).

The id and workspace travel in context variables, which asyncio copies into every task a request
starts, so lines written deep in core code carry them without being handed anything.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import json
import logging
import sys
import time
from typing import TextIO

from core.config import LoggingConfig

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
workspace: contextvars.ContextVar[str | None] = contextvars.ContextVar("workspace", default=None)


class _Context(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.workspace = workspace.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return self._time(record.created)

    def _time(self, created: float) -> str:
        # The access log writes a line per request: the date and time are formatted once a second.
        second = int(created)
        if second != self._second[0]:
            self._second = (second, time.strftime("%Y-%m-%d %H:%M:%S", self.converter(created)))
        return f"{self._second[1]},{int((created - second) * 1000):03d}"

    def line(self, created: float, levelname: str, name: str, message: str, rid: str | None, ws: str | None) -> str:
        """A line without traceback, as the format string above writes it, then the context."""
        context = "" if rid is None else f" [rid={rid} ws={ws or '-'}]"
        return f"{self._time(created)} {levelname} {name}: {message}{context}"

    def format(self, record: logging.LogRecord) -> str:
        rid, ws = getattr(record, "request_id", None), getattr(record, "workspace", None)
        if not (record.exc_info or record.exc_text or record.stack_info):
            # Formatted directly, without logging's general path (a third of a line's cost).
            record.message = record.getMessage()
            return self.line(record.created, record.levelname, record.name, record.message, rid, ws)
        context = "" if rid is None else f" [rid={rid} ws={ws or '-'}]"
        first, newline, rest = super().format(record).partition("\n")  # the traceback follows the context
        return f"{first}{context}{newline}{rest}"


class JsonFormatter(logging.Formatter):
    def line(self, created: float, levelname: str, name: str, message: str, rid: str | None, ws: str | None,
             exception: str | None = None) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": levelname.lower(),
            "logger": name,
            "message": message,
        }
        if rid is not None:
            entry["requestId"] = rid
        if ws is not None:
            entry["workspace"] = ws
        if exception is not None:
            entry["exception"] = exception
        return json.dumps(entry, ensure_ascii=False)

    def format(self, record: logging.LogRecord) -> str:
        return self.line(record.created, record.levelname, record.name, record.getMessage(),
                         getattr(record, "request_id", None), getattr(record, "workspace", None),
                         self.formatException(record.exc_info) if record.exc_info else None)


class BatchingHandler(logging.StreamHandler[TextIO]):
    """Writes each line at once but flushes INFO and DEBUG lines in batches, at most
    ``FLUSH_DELAY_SECONDS`` after the first of them: the access log writes a line per request,
    and a flush (a system call) per line was a tenth of the cost of a simple GET. Warnings and
    errors are flushed at once, and so is everything logged outside the event loop's thread.
    A process killed with SIGKILL may lose the last fraction of a second of INFO lines.
    """

    FLUSH_DELAY_SECONDS = 0.1

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream if stream is not None else _buffered_stderr())
        self._flush_loop: asyncio.AbstractEventLoop | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
            if record.levelno >= logging.WARNING or not self._flush_later():
                self.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - as logging.StreamHandler does: a log line never breaks the caller
            self.handleError(record)

    def write_direct(self, levelno: int, name: str, message: str) -> None:
        """A line written without a ``LogRecord``, for ``direct_handler``'s callers."""
        line = self.formatter.line(time.time(), logging.getLevelName(levelno), name, message,  # type: ignore[union-attr]
                                   request_id.get(), workspace.get())
        with self.lock:  # type: ignore[union-attr]
            try:
                self.stream.write(line + self.terminator)
                if levelno >= logging.WARNING or not self._flush_later():
                    self.flush()
            except Exception:  # noqa: BLE001 - as emit: a log line never breaks the caller
                self.handleError(logging.makeLogRecord({"msg": message, "levelno": levelno, "name": name}))

    def _flush_later(self) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False  # no event loop in this thread: nothing would ever flush
        if self._flush_loop is not loop:  # none pending, or on a loop that ended before it ran
            self._flush_loop = loop
            loop.call_later(self.FLUSH_DELAY_SECONDS, self._flush_now)
        return True

    def _flush_now(self) -> None:
        self._flush_loop = None
        self.flush()


def direct_handler(logger: logging.Logger, level: int) -> BatchingHandler | None:
    """The handler that alone would write ``logger``'s line at ``level``, when that is the one
    ``configure`` installed and nothing else would see the record; ``None`` otherwise (a test's
    capture handler, another configuration), and the line then takes logging's general path.

    The access log writes a line for every request. Through ``Logger.log`` (a record, its
    filters and handlers) that line cost 5 µs of CPU in a tight loop and several times that in a
    busy server; written directly, about half. The line is the same either way."""
    if not logger.isEnabledFor(level) or logger.handlers or logger.filters or not logger.propagate:
        return None
    handlers = logging.root.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    if (type(handler) is not BatchingHandler or len(handler.filters) != 1 or level < handler.level
            or not hasattr(handler.formatter, "line")):
        return None
    return handler


def _buffered_stderr() -> TextIO:
    """stderr without its line buffering (Python flushes it at every newline), so that
    ``BatchingHandler`` decides when lines reach the file; stderr as it is where it has no file."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stderr
    return open(fd, "w", buffering=1 << 16, encoding="utf-8", errors="backslashreplace", closefd=False)


def configure(config: LoggingConfig, stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's lines to stderr (or ``stream``) in the configured format and level."""
    handler = BatchingHandler(stream)
    handler.addFilter(_Context())
    handler.setFormatter(JsonFormatter() if config.format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(config.level.upper())
    # Neither format shows threads, processes or source lines: not collecting them makes every
    # record cheaper, the access log line of each request included (logging HOWTO, "Optimization").
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    return handler
