"""The run bar's ETA with its error margin, steady: between two readings it moves (beyond the
time that passed) by at most the margin it stated at the first.

`console.run_eta` gives the raw estimate (the estimator's speed, then the run's average
speed); it jumps when the run's speed changes (an LLM pause, a burst of parallel jobs). What
the bar shows starts at the raw value and then follows it, each reading moving by at most the
last stated margin; the margin is the larger of the speed's own uncertainty (a share of the
time left: `ESTIMATE_ERROR` while only the estimator speaks, shrinking to `MEASURED_ERROR` as
the run measures its budget) and how far the raw estimate now disagrees with what is shown.
So the bar never claims more certainty than its own readings bear out.
"""

from __future__ import annotations

from dataclasses import dataclass

ESTIMATE_ERROR = 0.5  # the estimator's speed (one timed iteration, app.desk) against a run's: +-50% of the time left
MEASURED_ERROR = 0.1  # the run's own average speed, once MEASURED_FROM of its budget is measured: +-10%


def speed_error(measured_share: float) -> float:
    """The relative error of the time left when MEASURED_SHARE (0..1) of the speed is measured."""
    share = min(max(measured_share, 0.0), 1.0)
    return (1.0 - share) * ESTIMATE_ERROR + share * MEASURED_ERROR


@dataclass
class SteadyEta:
    """One bar's shown ETA and margin (seconds), updated at each reading."""

    shown: float | None = None
    margin: float = 0.0
    at: float = 0.0  # the elapsed seconds of the last reading

    def read(self, elapsed: float, raw: float, measured_share: float) -> tuple[float, float]:
        """(shown seconds left, margin) at ELAPSED for the raw estimate RAW; a second reading
        at the same ELAPSED (the terminal refreshes faster than the clock moves) repeats it."""
        if self.shown is not None and elapsed <= self.at:
            return self.shown, self.margin
        if self.shown is None:
            shown = raw
        else:
            expected = max(self.shown - max(elapsed - self.at, 0.0), 0.0)
            shown = expected + min(max(raw - expected, -self.margin), self.margin)
        self.shown, self.at = shown, elapsed
        self.margin = max(speed_error(measured_share) * raw, abs(raw - shown))
        return shown, self.margin
