"""Trace replay: read a JSONL trace into timed chat requests for an open-loop window.

Each line is one request: when to send it, what to send and how many tokens to ask for.
Blank lines and lines starting with `#` are skipped in both layouts. Line numbers are the
file's own (1-based, comments and blank lines counted); an item's prompt id is
`trace/<workload name>/<line>`, so a method and the baseline pair on the same lines.

Layout `specsweep` (strict: any other field is an error), one JSON object per line:

- `timestamp_s` (number >= 0, seconds) or `timestamp_ms` (number >= 0, milliseconds), not both;
- exactly one of `messages` (a non-empty list of `{"role": str, "content": str}`, nothing
  else in a message), `prompt` (a string, sent as one user message) or `input_length` (an
  integer >= 1: a prompt of that many words is synthesised, see below, unique to the line);
- `output_length` (integer >= 1): sent as the request's max_tokens.

Layout `mooncake`, the one SGLang's `bench_serving --dataset-name mooncake` replays (the
Mooncake FAST'25 traces): `{"timestamp": <ms>, "input_length": int, "output_length": int,
"hash_ids": [int, ...]}`; other fields are ignored. Each hash id stands for one 512-token block
of the prompt, and requests whose hash ids start alike share that prompt prefix. The prompt is
synthesised block by block: the words of a block are drawn from a fixed 256-word vocabulary by a
hash of its id (SHAKE-128), so equal ids give equal text and a shared leading run of ids gives a
shared text (and token) prefix; the prompt is cut to `input_length` words; blocks beyond the
hash ids (input_length > 512 x their number) are filled with words unique to the line.

No tokenizer is loaded at run time: one "token" is one word of that vocabulary (short common
English words, one token each in the usual BPE vocabularies give or take the first word; the
chat template adds its own). The server's reported prompt_tokens is what gets stored. The words
are random, not prose: a draft's acceptance on this text is not that of real traffic.

Real text instead (`text`, a `TextMatch`; the workload's `text:` option, docs/trace-text.md):
each input_length line gets text drawn from a pool of real prompts whose estimated length
(characters / chars_per_token) is within a tolerance of its N, seeded by the line number, or
whole texts joined and cut when none fits; Mooncake hash ids map to blocks of that text, so
shared leading ids still share a text prefix (the rules: collect/plan/tracetext). The item
records the drawn texts' ids (`text_ids`), their category and N (`input_tokens`).

Time: items are sorted by timestamp (stable: equal times keep file order), made relative to the
first, and multiplied by `time_scale`: t_s = (timestamp - first timestamp) x time_scale (for
mooncake (timestamp - first)/1000 x time_scale: SGLang's `--mooncake-slowdown-factor`; 2 = half
the rate). `limit` keeps the first N items after sorting. `max_input_tokens` clips synthesised
prompts (input_length lines, both layouts; clipping keeps shared prefixes up to the clip) so a
small-context model can replay a long-prompt trace; it is recorded nowhere else, and clipping
changes the load (less prefill, less cache), so say so when reporting. `prompt`/`messages` lines
are never clipped. `system` prepends a system message to every item (an error on a `messages`
line that starts with its own system message).

Every bad line raises TraceError naming the file, the line and the field; so does an empty trace.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from specsweep.collect.plan.traces.text import BLOCK_TOKENS, TextMatch

# 256 short common English words (a byte picks one); each is one BPE token after a space
_WORDS = """
the of and to in is was for on that with as it be by at from his an are have this not but had they
which or he she we you their has were all been one its who more will would there her can no if so
when what up out about into than them some only other new time also two these may first any then
could like just over my after most made such our very well both way even back much where many down
good those how make each because still through before between year people should see work day part
long same own last three under while state world life great old help high place small since against
right off take thing ask need feel tell few leave put mean keep let begin seem show hear play run
move live hold bring write stand lose pay meet sit lead stay fall cut reach raise pass sell decide
return open walk win offer love buy wait serve send expect build speak read allow add spend grow
lie change follow stop create set turn start call try hand eye head face fact group number point
home water room mother area money story month lot book job word issue side kind house service
friend father power hour game line end member law car city name team minute idea kid body parent
level office door health person art war history party result morning reason research girl guy
moment air teacher force education food table
"""
VOCAB = tuple(_WORDS.split())

SOURCES = ("messages", "prompt", "input_length")  # a specsweep line gives exactly one
SPECSWEEP_FIELDS = ("timestamp_s", "timestamp_ms", *SOURCES, "output_length")


@dataclass(frozen=True)
class TraceItem:
    t_s: float  # send offset from the first request of the trace, after time_scale
    prompt_id: str  # f"trace/{name}/{line_no}" (1-based line number of the file)
    messages: list[dict[str, str]]  # chat messages to send
    max_tokens: int  # the output length to ask for
    category: str = "trace"  # the drawn real text's category, when it has one (TextMatch)
    text_ids: str = ""  # real text drawn: its prompt ids joined by '+' ('' : none drawn)
    input_tokens: int | None = None  # the line's input_length after clipping (None: given text)


class TraceError(ValueError):
    """A bad trace: the message starts with `file:line:` and names the field."""


@dataclass(frozen=True)
class _Line:
    where: str  # "file:line" for errors found after parsing
    line_no: int
    ts_s: float  # the line's own timestamp, in seconds
    max_tokens: int
    messages: list[dict[str, str]] | None  # given text (messages or prompt lines)
    input_length: int | None  # synthesised prompt (input_length and mooncake lines)
    hash_ids: tuple[int, ...] = ()


def read_trace(
    path: Path,
    fmt: Literal["specsweep", "mooncake"],
    *,
    name: str,
    time_scale: float = 1.0,
    limit: int | None = None,
    max_input_tokens: int | None = None,
    system: str | None = None,
    text: TextMatch | None = None,
) -> list[TraceItem]:
    """The trace's requests, sorted by send time (formats and rules: the module docstring;
    `text`: real text for input_length lines instead of vocabulary words)."""
    parsers = {"specsweep": _specsweep, "mooncake": _mooncake}
    if fmt not in parsers:
        raise ValueError(f"trace format must be specsweep or mooncake, got {fmt!r}")
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise ValueError(f"time_scale must be a number > 0, got {time_scale!r}")
    for label, value in (("limit", limit), ("max_input_tokens", max_input_tokens)):
        if value is not None and value < 1:
            raise ValueError(f"{label} must be >= 1, got {value!r}")
    lines = sorted(_lines(Path(path), parsers[fmt]), key=lambda r: r.ts_s)
    if not lines:
        raise TraceError(f"{path}: the trace holds no requests")
    if text is not None and all(r.input_length is None for r in lines):
        raise TraceError(f"{path}: `text` draws prompts for input_length lines; there are none")
    first = lines[0].ts_s
    items = []
    for r in lines[:limit]:
        n = r.input_length and min(r.input_length, max_input_tokens or r.input_length)
        body, category, ids = _prompt(r, name, n, text)
        items.append(
            TraceItem(
                (r.ts_s - first) * time_scale,
                f"trace/{name}/{r.line_no}",
                _with_system(r, body, system),
                r.max_tokens,
                category=category,
                text_ids=ids,
                input_tokens=n,
            )
        )
    return items


def _lines(path: Path, parse: Any) -> list[_Line]:
    found = []
    with path.open("rb") as f:
        for no, raw in enumerate(f, 1):
            where = f"{path}:{no}"
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise TraceError(f"{where}: not UTF-8 text") from None
            if not text or text.startswith("#"):
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{where}: a line must be a JSON object, got {_kind(obj)}")
            found.append(parse(obj, where, no))
    return found


def _specsweep(obj: dict[str, Any], where: str, no: int) -> _Line:
    unknown = [k for k in obj if k not in SPECSWEEP_FIELDS]
    if unknown:
        raise TraceError(
            f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(SPECSWEEP_FIELDS)})"
        )
    units = [k for k in ("timestamp_s", "timestamp_ms") if k in obj]
    if len(units) == 2:
        raise TraceError(f"{where}: give timestamp_s or timestamp_ms, not both")
    if not units:
        raise TraceError(f"{where}: missing field 'timestamp_s' (or 'timestamp_ms')")
    ts = _number(obj, units[0], where) / (1000.0 if units[0] == "timestamp_ms" else 1.0)
    sources = [k for k in SOURCES if k in obj]
    if len(sources) != 1:
        raise TraceError(
            f"{where}: give exactly one of messages, prompt, input_length, "
            f"got {', '.join(sources) if sources else 'none'}"
        )
    max_tokens = _int(obj, "output_length", where)
    if sources[0] == "input_length":
        return _Line(where, no, ts, max_tokens, None, _int(obj, "input_length", where))
    if sources[0] == "prompt":
        if not isinstance(obj["prompt"], str):
            raise TraceError(f"{where}: prompt must be a string, got {_kind(obj['prompt'])}")
        return _Line(where, no, ts, max_tokens, [{"role": "user", "content": obj["prompt"]}], None)
    return _Line(where, no, ts, max_tokens, _chat(obj["messages"], where), None)


def _mooncake(obj: dict[str, Any], where: str, no: int) -> _Line:
    ts = _number(obj, "timestamp", where) / 1000.0
    n_in = _int(obj, "input_length", where)
    max_tokens = _int(obj, "output_length", where)
    if "hash_ids" not in obj:
        raise TraceError(f"{where}: missing field 'hash_ids'")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
        raise TraceError(f"{where}: hash_ids must be a list of integers, got {ids!r:.80}")
    return _Line(where, no, ts, max_tokens, None, n_in, tuple(ids))


def _chat(messages: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise TraceError(
            f"{where}: messages must be a non-empty list of {{role, content}}, got {messages!r:.80}"
        )
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TraceError(f"{where}: messages[{i}] must be an object, got {_kind(m)}")
        for key in ("role", "content"):
            if not isinstance(m.get(key), str):
                got = "nothing" if key not in m else _kind(m[key])
                raise TraceError(f"{where}: messages[{i}].{key} must be a string, got {got}")
        extra = [k for k in m if k not in ("role", "content")]
        if extra:
            raise TraceError(f"{where}: messages[{i}] has unknown field {extra[0]!r}")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _number(obj: dict[str, Any], key: str, where: str) -> float:
    if key not in obj:
        raise TraceError(f"{where}: missing field {key!r}")
    value = obj[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise TraceError(f"{where}: {key} must be a number >= 0, got {value!r}")
    return float(value)


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    if key not in obj:
        raise TraceError(f"{where}: missing field {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TraceError(f"{where}: {key} must be an integer >= 1, got {value!r}")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), repr(value))


def _prompt(
    r: _Line, name: str, n: int | None, text: TextMatch | None
) -> tuple[list[dict[str, str]], str, str]:
    """The line's messages before `system`, its category and the real text ids drawn."""
    if n is None:
        assert r.messages is not None
        return r.messages, "trace", ""
    if text is None:
        words = synthesise(r.hash_ids, n, f"{name}/{r.line_no}")
        return [{"role": "user", "content": words}], "trace", ""
    try:
        drawn, category, ids = text.prompt(r.hash_ids, n, r.line_no)
    except ValueError as exc:
        raise TraceError(f"{r.where}: text: {exc}") from None
    return [{"role": "user", "content": drawn}], category, ids


def _with_system(r: _Line, body: list[dict[str, str]], system: str | None) -> list[dict[str, str]]:
    if system is None:
        return body
    if body[0]["role"] == "system":
        raise TraceError(
            f"{r.where}: messages start with a system message and the workload "
            f"gives `system` too; drop one"
        )
    return [{"role": "system", "content": system}, *body]


def synthesise(hash_ids: tuple[int, ...], n_words: int, own: str) -> str:
    """n_words words: block i is hash_ids[i]'s block, or a block unique to `own` past them."""
    words: list[str] = []
    block = 0
    while len(words) < n_words:
        key = f"hash/{hash_ids[block]}" if block < len(hash_ids) else f"line/{own}/{block}"
        words.extend(_block(key))
        block += 1
    return " ".join(words[:n_words])


@lru_cache(maxsize=4096)
def _block(key: str) -> tuple[str, ...]:
    """The 512 words of one block, a pure function of its key (one vocabulary word per byte)."""
    return tuple(VOCAB[b] for b in hashlib.shake_128(key.encode()).digest(BLOCK_TOKENS))
