"""Progress of a long run on a terminal: ``distlint: 120/300 files``, on stderr, rewritten in
place, once the run has taken longer than a couple of seconds. Never on anything but a
terminal: piped or redirected output is byte for byte what it is without it."""

from __future__ import annotations

import time
from typing import Callable, TextIO

DELAY = 2.0  # seconds of silence before progress is shown (short runs show nothing)
INTERVAL = 0.1  # at most ten updates a second


class Progress:
    __slots__ = ("stream", "clock", "start", "total", "done", "shown", "last")

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.start = clock()
        self.total: int | None = None
        self.done = 0
        self.shown = False  # a progress line is on the screen
        self.last = 0.0

    @classmethod
    def for_terminal(cls, stream: TextIO) -> Progress | None:
        try:
            return cls(stream) if stream.isatty() else None
        except (AttributeError, ValueError):
            return None

    def set_total(self, total: int) -> None:
        self.total = total

    def advance(self) -> None:
        self.done += 1
        now = self.clock()
        if now - self.start < DELAY or (self.shown and now - self.last < INTERVAL):
            return
        self.last = now
        total = f"/{self.total}" if self.total else ""
        done = min(self.done, self.total) if self.total else self.done
        self.stream.write(f"\r\x1b[Kdistlint: {done}{total} files")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        """Take the progress line off the screen (before other output, and at the end)."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
