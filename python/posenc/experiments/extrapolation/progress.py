"""Progress of the extrapolation experiment on stderr: on a terminal one bar
redrawn in place with the elapsed time and an ETA; otherwise plain lines
(one per measured point), so logs and CI output stay readable.

The ETA divides the work still to do by the rate so far, in work units: a
trained token counts 3 (forward + backward), an evaluated token 1 plus its
attention share (length / 4L), measured as the run goes.
"""
from __future__ import annotations

import sys
import time
from typing import IO, Optional


def clock(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, total_units: float, stream: Optional[IO[str]] = None,
                 tty: Optional[bool] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total = max(total_units, 1.0)
        self.done = 0.0
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._status = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def eta(self) -> Optional[float]:
        if self.done <= 0:
            return None
        return self.elapsed() / self.done * max(self.total - self.done, 0.0)

    def advance(self, units: float, status: str) -> None:
        """Adds work done; redraws the bar (terminal only, at most 5 per second)."""
        self.done += units
        self._status = status
        now = time.monotonic()
        if self.tty and now - self._last_draw >= 0.2:
            self._last_draw = now
            self._draw()

    def _draw(self) -> None:
        frac = min(self.done / self.total, 1.0)
        width = 24
        fill = int(frac * width)
        eta = self.eta()
        line = (f"\r[{'#' * fill}{'.' * (width - fill)}] {frac * 100:5.1f}% "
                f"{clock(self.elapsed())} ETA {clock(eta) if eta is not None else '?'}  "
                f"{self._status}")
        self.stream.write(line[:160].ljust(100))
        self.stream.flush()

    def line(self, text: str) -> None:
        """A line that stays: above the bar on a terminal, else a log line
        with the elapsed time and ETA."""
        eta = self.eta()
        stamp = f"[{clock(self.elapsed())}, ETA {clock(eta) if eta is not None else '?'}]"
        if self.tty:
            self.stream.write("\r" + " " * 100 + "\r" + text + "\n")
            self._draw()
        else:
            self.stream.write(f"{stamp} {text}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
