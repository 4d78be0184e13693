"""The lean SSE framing of the streaming client on hand-built byte streams."""

from __future__ import annotations

from specsweep.collect.engines.llamacpp import ChatStream
from specsweep.collect.http.client import Result, _decode, _take, iter_sse
from specsweep.schema.store import utcnow


def test_events_split_across_reads_are_joined() -> None:
    buf = bytearray()
    assert iter_sse(buf + b"") == []
    buf += b'data: {"a": 1}\n\ndata: {"b"'
    assert iter_sse(buf) == [b'{"a": 1}']
    buf += b": 2}\n\n"
    assert iter_sse(buf) == [b'{"b": 2}'] and buf == bytearray()


def test_crlf_comments_and_multiline_data() -> None:
    buf = bytearray(b": keep-alive\r\n\r\ndata: x\r\ndata: y\r\n\r\ndata:[DONE]\n\n")
    assert iter_sse(buf) == [b"x\ny", b"[DONE]"]


def test_only_text_chunks_move_ttft_and_e2e() -> None:
    res, parser, texts = Result(sent_at=utcnow(), t0=0.0), ChatStream(), []
    events = [
        ({"choices": [{"delta": {"role": "assistant"}}]}, 0.01),  # role only
        ({"choices": [{"delta": {"content": "Hel"}}]}, 0.05),
        ({"choices": [{"delta": {"content": "lo"}}]}, 0.07),
        ({"choices": [{"delta": {}, "finish_reason": "length"}]}, 0.08),  # no text
        ({"choices": [], "usage": {"completion_tokens": 2}, "timings": {"predicted_n": 2}}, 0.09),
    ]
    for event, t in events:
        _take(parser, event, t, res, texts)
    assert (res.ttft_s, res.e2e_s, res.chunk_times_s, "".join(texts)) == (
        0.05,
        0.07,
        [0.05, 0.07],
        "Hello",
    )
    assert res.chunk_tokens is None  # llama.cpp does not say how many tokens a chunk holds
    stats = parser.stats()
    assert stats["output_tokens"] == 2 and stats["finish_reason"] == "length"


def test_data_lines_lose_one_leading_space_only() -> None:
    """SSE: the value after `data:` loses ONE leading space; more whitespace is data."""
    buf = bytearray(b"data:  two\n\ndata:\tx\n\ndata:   a\ndata: b\n\ndata:none\n\n")
    assert iter_sse(buf) == [b" two", b"\tx", b"  a\nb", b"none"]


def test_json_event_with_extra_leading_whitespace_still_decodes() -> None:
    assert _decode(b'  {"a": 1}') == {"a": 1}
