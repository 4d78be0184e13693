"""Real text for a trace's input_length lines: `TextMatch` turns a requested prompt length N
(tokens) into text drawn from a pool of real prompts (a plan's prompt source), seeded, so that
a replayed trace carries real prose and code instead of vocabulary words
(collect/plan/traces/read.py reads the trace; docs/trace-text.md says what this can show).

No tokenizer is loaded: a text's estimated length is est(t) = len(t) / chars_per_token
(characters, Python code points). A prompt matches N when N(1 - tol) <= est <= N(1 + tol).

- A line without hash ids draws one whole text among the pool's texts that match N, chosen by
  a generator seeded with (seed, line number). When none matches, it joins whole texts of the
  pool (a seeded order of the whole pool, each text at most once, separated by a blank line)
  until est >= N and cuts at N x chars_per_token characters, back to the last whitespace at or
  after N(1 - tol) x chars_per_token (mid-word only when there is none). When the whole pool
  joined is shorter than N(1 - tol), the line is an error.
- A line with hash ids (Mooncake) keeps its prefix sharing: the pool, in a seeded order,
  joined, is cut into consecutive word-aligned blocks of at most BLOCK_TOKENS x chars_per_token
  characters (L blocks); hash id h is block (h + offset) mod L, offset seeded, so equal ids
  give equal text, a run of consecutive ids reads as continuous text, and ids that differ by
  less than L never share a block. Blocks past the line's hash ids are the blocks that follow
  a start drawn for the line. The blocks are joined by a space and cut to N as above; a line
  needing more than L blocks is an error (its text would repeat).
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from dataclasses import dataclass
from functools import cached_property

BLOCK_TOKENS = 512  # Mooncake's block: one hash id per 512 tokens
JOIN = "\n\n"  # between whole texts


@dataclass(frozen=True)
class PoolText:
    prompt_id: str  # the source's own id (humaneval/HumanEval-0, mtbench/81, ...)
    text: str
    category: str = ""  # '' when the source has none


@dataclass(frozen=True)
class TextMatch:
    """Draws real text of about N estimated tokens (the module docstring has the rules)."""

    pool: tuple[PoolText, ...]
    seed: int = 0
    tolerance: float = 0.1
    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        if not self.pool or not any(t.text.strip() for t in self.pool):
            raise ValueError("the text pool is empty")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        if not self.chars_per_token > 0:
            raise ValueError(f"chars_per_token must be > 0, got {self.chars_per_token!r}")

    def estimate(self, text: str) -> float:
        """est(t) = len(t) / chars_per_token."""
        return len(text) / self.chars_per_token

    def prompt(self, hash_ids: tuple[int, ...], n: int, line: int) -> tuple[str, str, str]:
        """(text, category, text ids) for a line asking for n tokens; ValueError if none."""
        rng = random.Random(f"{self.seed}/line/{line}")  # str seeds hash with sha512: stable
        if hash_ids:
            return self._from_blocks(hash_ids, n, rng)
        lo, hi = self._band(n)
        fits = [t for t in self.pool if lo <= len(t.text) <= hi]
        if fits:
            t = rng.choice(fits)
            return t.text, t.category or "trace", t.prompt_id
        order = list(self.pool)
        rng.shuffle(order)
        joined, used, size = [], [], 0
        for t in order:
            if size >= n * self.chars_per_token:
                break
            joined.append(t.text)
            used.append(t)
            size += len(t.text) + len(JOIN)
        return self._cut(JOIN.join(joined), n), _category(used), _ids(used)

    def _band(self, n: int) -> tuple[float, float]:
        """The characters a text of n tokens may have: N(1 -/+ tol) x chars_per_token."""
        cpt, tol = self.chars_per_token, self.tolerance
        return n * (1 - tol) * cpt, n * (1 + tol) * cpt

    def _cut(self, text: str, n: int) -> str:
        """text cut at N x cpt characters, back to the last whitespace at or after the band's
        low end (lo); mid-word at N x cpt when there is none. Its length is in [lo, N x cpt]."""
        lo = math.ceil(self._band(n)[0])
        if len(text) < lo:
            total = sum(len(t.text) for t in self.pool) / self.chars_per_token
            raise ValueError(
                f"no text fits {n} tokens and the whole pool joined holds about {total:.0f}: "
                f"draw from a larger prompt source or clip with max_input_tokens"
            )
        end = min(len(text), int(n * self.chars_per_token))
        out = text[: _word_end(text, lo, end)].rstrip()
        return out if len(out) >= lo else text[:end]  # a whitespace run across lo

    @cached_property
    def _stream(self) -> tuple[str, list[int], list[PoolText]]:
        """The pool in a seeded order, joined; each text's start offset; that order."""
        order = list(self.pool)
        random.Random(f"{self.seed}/blocks").shuffle(order)
        starts, at = [], 0
        for t in order:
            starts.append(at)
            at += len(t.text) + len(JOIN)
        return JOIN.join(t.text for t in order), starts, order

    @cached_property
    def blocks(self) -> list[tuple[str, tuple[PoolText, ...]]]:
        """The stream's word-aligned blocks and the texts each overlaps, in stream order."""
        stream, starts, order = self._stream
        size, out, p = int(BLOCK_TOKENS * self.chars_per_token), [], 0
        while True:
            while p < len(stream) and stream[p].isspace():
                p += 1
            if p >= len(stream):
                return out
            end = _word_end(stream, p + 1, min(len(stream), p + size))
            first = bisect.bisect_right(starts, p) - 1
            last = bisect.bisect_right(starts, end - 1) - 1
            out.append((stream[p:end].rstrip(), tuple(order[first : last + 1])))
            p = end

    def _from_blocks(
        self, hash_ids: tuple[int, ...], n: int, rng: random.Random
    ) -> tuple[str, str, str]:
        """Block k is hash_ids[k]'s, (h + offset) mod L; past them, the line's own run."""
        blocks = self.blocks
        offset = random.Random(f"{self.seed}/hash").randrange(len(blocks))
        own = rng.randrange(len(blocks))
        picked: list[tuple[str, tuple[PoolText, ...]]] = []
        while sum(len(b) + 1 for b, _ in picked) < n * self.chars_per_token:
            k = len(picked)
            if k == len(blocks):
                raise ValueError(
                    f"{n} tokens need more than the pool's {k} blocks of up to {BLOCK_TOKENS} "
                    f"tokens: draw from a larger prompt source or clip with max_input_tokens"
                )
            index = hash_ids[k] + offset if k < len(hash_ids) else own + k - len(hash_ids)
            picked.append(blocks[index % len(blocks)])
        used = list(dict.fromkeys(t for _, texts in picked for t in texts))
        text = self._cut(" ".join(b for b, _ in picked), n)
        return text, _category(used), _ids(used)

    def errors(self, drawn: list[tuple[int, str]]) -> dict[str, str]:
        """Relative error of the estimate, (est - N) / N, over (N, text) pairs: mean and
        median (signed) and max (absolute), as repr of floats; {} for none."""
        errs = [(self.estimate(t) - n) / n for n, t in drawn]
        if not errs:
            return {}
        return {
            "estimate_error.mean": repr(statistics.fmean(errs)),
            "estimate_error.median": repr(statistics.median(errs)),
            "estimate_error.max": repr(max(abs(e) for e in errs)),
        }


def _word_end(text: str, lo: int, end: int) -> int:
    """The largest i in [lo, end] where text[i] is whitespace (or i = len(text)); end if none."""
    if end >= len(text):
        return len(text)
    for i in range(end, max(lo, 0) - 1, -1):
        if text[i].isspace():
            return i
    return end


def _ids(used: list[PoolText]) -> str:
    return "+".join(t.prompt_id for t in used)


def _category(used: list[PoolText]) -> str:
    """The one category of the texts drawn; 'trace' when they have none or several."""
    found = {t.category for t in used}
    one = found.pop() if len(found) == 1 else ""
    return one or "trace"
