"""A tiny helper Ana wrote for the balcony garden: warn when frost is coming."""

from dataclasses import dataclass


@dataclass
class Forecast:
    day: str
    low_celsius: float


def frost_days(forecasts: list[Forecast], threshold: float = 1.0) -> list[str]:
    """Days whose low drops below the threshold, when the chilis must come inside."""
    return [f.day for f in forecasts if f.low_celsius < threshold]


class BalconyAlarm:
    def __init__(self, plants: list[str]) -> None:
        self.plants = plants

    def message(self, days: list[str]) -> str:
        if not days:
            return "No frost ahead."
        return f"Bring in {', '.join(self.plants)} before {days[0]}."
