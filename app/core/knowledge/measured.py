"""What the corpus measured for each signature, as `tracelore eval` wrote it beside the library.

Apart from the rest of the scoring (app/core/knowledge/scoring.py) so that loading the
library, which reads these figures, does not import what only `tracelore eval` needs.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_CASES = 3  # fewer real logs than this say too little about a signature


def plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def logs_word(n: int) -> str:
    return plural(n, "log")


@dataclass(frozen=True)
class Measured:
    """What the corpus measured for one signature."""

    id: str
    cases: int = 0  # failure logs whose first failure is this class
    recognised: int = 0  # of those, named first
    named_wrongly: int = 0  # logs of another failure where this one was named first
    false_alarms: int = 0  # healthy logs where this one was named at `likely`
    healthy: int = 0  # healthy logs in the corpus
    echo_cases: int = 0  # logs where it is labelled an echo of another failure
    first_sight_cases: int = 0  # sampled logs of it, whose class the library had when they were added
    first_sight_right: int = 0  # of those, named first before any fingerprint changed for them

    @property
    def recall(self) -> float | None:
        return self.recognised / self.cases if self.cases else None

    @property
    def precision(self) -> float | None:
        named = self.recognised + self.named_wrongly
        return self.recognised / named if named else None

    @property
    def enough(self) -> bool:
        """Enough real logs behind the figures to say something."""
        return self.cases >= MIN_CASES

    def short(self) -> str:
        """The figures next to a verdict: how far to trust this signature when it is named."""
        if not self.cases:
            if self.echo_cases:
                return f"seen only as an echo of other failures, in {self.echo_cases} real {logs_word(self.echo_cases)}"
            return "no real log of this failure is in the corpus yet"
        said = f"recognised {self.recognised} of {self.cases} real {logs_word(self.cases)}"
        said += f", named wrongly in {self.named_wrongly}"
        if self.first_sight_cases:
            seen = f"{self.first_sight_right} of {self.first_sight_cases}"
            said += f"; at first sight (logs it had never seen), right in {seen}"
        return said + ("" if self.enough else " (too few logs to trust yet)")

    def sentence(self) -> str:
        """The figures in words, as a reader sees them on the signature's page."""
        if not self.cases and self.echo_cases:
            said = (
                f"Known as an echo: in {self.echo_cases} real {logs_word(self.echo_cases)} it follows another failure"
            )
        elif not self.cases:
            said = "No real log of this failure is in the corpus yet"
        else:
            said = f"Recognised {self.recognised} of {self.cases} real {logs_word(self.cases)}"
        said += f"; named wrongly in {self.named_wrongly} {logs_word(self.named_wrongly)} of other failures"
        if self.false_alarms:
            said += f"; {self.false_alarms} false {plural(self.false_alarms, 'alarm')} in {self.healthy} healthy logs."
        else:
            said += f"; no false alarm in {self.healthy} healthy {logs_word(self.healthy)}."
        if self.cases and not self.enough:
            said += f" Fewer than {MIN_CASES} real logs are behind these figures: too few to trust them yet."
        if self.first_sight_cases:
            said += (
                f" On sampled logs it had never seen, it was named first in {self.first_sight_right} of"
                f" {self.first_sight_cases} before any fingerprint changed for them."
            )
        return said

    def as_dict(self) -> dict[str, int]:
        return {
            "cases": self.cases,
            "recognised": self.recognised,
            "named_wrongly": self.named_wrongly,
            "false_alarms": self.false_alarms,
            "healthy": self.healthy,
            "echo_cases": self.echo_cases,
            "first_sight_cases": self.first_sight_cases,
            "first_sight_right": self.first_sight_right,
        }
