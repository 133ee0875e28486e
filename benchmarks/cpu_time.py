"""Where the whole machine's CPU time went during a measurement (Linux /proc/stat), to explain noise with facts."""
from __future__ import annotations

from pathlib import Path

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _read() -> dict[str, int] | None:
    try:
        values = Path("/proc/stat").read_text().splitlines()[0].split()[1:1 + len(FIELDS)]
    except (OSError, IndexError):
        return None
    return dict(zip(FIELDS, map(int, values)))


class Meter:
    """Context manager: the share of each kind of CPU time between enter and exit."""

    start: dict[str, int] | None
    shares: dict[str, float] | None  # kind -> percent of the CPU time; None: /proc/stat could not be read

    def __enter__(self) -> Meter:
        self.start, self.shares = _read(), None
        return self

    def __exit__(self, *exc: object) -> None:
        end = _read()
        if self.start and end:
            delta = {k: end[k] - self.start[k] for k in FIELDS}
            total = sum(delta.values()) or 1
            self.shares = {k: 100 * v / total for k, v in delta.items()}

    def describe(self) -> str:
        if not self.shares:
            return "not available on this system"
        s = self.shares
        return (f"user+nice {s['user'] + s['nice']:.0f}%, system {s['system']:.0f}%, idle {s['idle']:.0f}%, "
                f"iowait {s['iowait']:.1f}%, steal {s['steal']:.1f}% (time taken by the hypervisor for other guests)")
