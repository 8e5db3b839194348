"""Log lines as ``[logging]`` asks: text or JSON, each line of a request carrying its request id and
workspace, so one request's lines can be found together (``X-Request-Id`` is the same id).

The id and workspace travel in context variables, which asyncio copies into every task a request
starts, so lines written deep in core code carry them without being handed anything.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
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
        # The access log writes a line per request: the date and time are formatted once a second.
        second = int(record.created)
        if second != self._second[0]:
            self._second = (second, super().formatTime(record, datefmt).partition(",")[0])
        return f"{self._second[1]},{int(record.msecs):03d}"

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid, ws = getattr(record, "request_id", None), getattr(record, "workspace", None)
        if rid is None:
            return line
        first, newline, rest = line.partition("\n")  # after the message, before any traceback
        return f"{first} [rid={rid} ws={ws or '-'}]{newline}{rest}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, attr in (("requestId", "request_id"), ("workspace", "workspace")):
            if getattr(record, attr, None) is not None:
                entry[key] = getattr(record, attr)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(config: LoggingConfig, stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's lines to stderr (or ``stream``) in the configured format and level."""
    handler = logging.StreamHandler(stream)
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
