"""Progress bars (rich, on stderr) and per-phase timings for long runs.

Bars show only on a terminal and not with ``quiet``; ``--profile`` prints the time of each phase.
"""

import sys
import time
from contextlib import contextmanager


class Phases:
    """Named phases of a run: each ``phase`` yields an ``advance(n)`` callback and is timed."""

    def __init__(self, quiet: bool = True):
        self.show = not quiet and sys.stderr.isatty()
        self.seconds = {}

    @contextmanager
    def phase(self, name: str, total: int | None = None, unit: str = ""):
        started = time.perf_counter()
        if not self.show:
            yield lambda n=1: None
        else:
            from rich.console import Console  # imported only for a bar: most runs never show one
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = [TextColumn(f"{name:<11}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                       TimeElapsedColumn()]
            with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task(name, total=total)
                yield lambda n=1: bar.advance(task, n)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def report(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{name} {seconds:.2f} s" for name, seconds in self.seconds.items()]
        return "profile: " + " | ".join(parts) + f" | total {total:.2f} s"
