"""The study file's `protocol:` section: how many blocks, contenders and seeds (ablate.stats.protocol runs it).

Apart from ablate.stats.protocol so that a trial, which reads the study file, does not import the
protocol's statistics (scipy: about a second of every trial interpreter's start-up).
"""
from __future__ import annotations

from dataclasses import dataclass

from ablate.words import count

SINGLE_BLOCK = 10**9  # a block size no study reaches: every combination in one block


@dataclass(frozen=True)
class ProtocolSettings:
    """The study file's `protocol:` section."""

    block_size: int = 8  # screening: combinations per block besides its baseline
    race_blocks: int = 6  # at most this many race blocks after screening; 0 = screening only
    contenders: int = 6  # at most this many combinations raced per block (leader included; the baseline extra)
    full_blocks: int | None = None  # N: every combination in each of N blocks (a full randomized block design)
    screen_baselines: int = 2  # baselines per screening block
    confirm_blocks: int = 3  # after the race: blocks of the leader (and the simplest of its set) with the baseline
    seeds: int = 3  # at most this many training seeds per accuracy group (ablate.stats.parity: 2, then where uncertain)

    @property
    def racing(self) -> bool:
        return self.full_blocks is None and self.race_blocks > 0

    def describe(self) -> str:
        if self.full_blocks:
            return f"every combination in each of {count(self.full_blocks, 'block')}, in a random order per block"
        blocks = ("one block" if self.block_size >= SINGLE_BLOCK  # the single pass: every combination at once
                  else f"blocks of {count(self.block_size, 'combination')}")
        text = (f"screening in {blocks} plus {count(self.screen_baselines, 'baseline measurement')}, in a random "
                f"order per block")
        return text + (f"; then racing of up to {count(self.contenders, 'contender')} in at most "
                       f"{count(self.race_blocks, 'block')}, eliminated by paired contrasts (studentized "
                       f"range, alpha spent over the looks), and {count(self.confirm_blocks, 'confirmation block')}"
                       if self.racing else "; no racing")


# The design before blocks.
SINGLE_PASS = ProtocolSettings(block_size=SINGLE_BLOCK, race_blocks=0, screen_baselines=1, confirm_blocks=0, seeds=1)
