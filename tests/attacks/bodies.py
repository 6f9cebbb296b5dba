"""Request bodies that are small on the wire and large once decoded (issue 24): the shapes a test,
the stack test and bench/attacks.py send. Each is written on the wire directly, byte by byte, as
building it with protobuf would take the memory the attack is about."""

from __future__ import annotations

import gzip
import json

from google.protobuf.internal.encoder import _VarintBytes

SPANS = 2_400_000  # 4.8 MB of empty spans: 4,713 bytes gzip, the figure


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _VarintBytes(len(payload)) + payload


def _request(scope_payload: bytes) -> bytes:
    # ExportTraceServiceRequest.resource_spans (1) -> ResourceSpans.scope_spans (2) -> payload;
    # the logs request has the same numbers (resource_logs 1, scope_logs 2, log_records 2).
    return _field(0x0A, _field(0x12, scope_payload))


def empty_spans(count: int = SPANS) -> bytes:
    """ScopeSpans.spans (field 2), each empty: two bytes a span."""
    return _request(b"\x12\x00" * count)


def empty_log_records(count: int = SPANS) -> bytes:
    """ScopeLogs.log_records (field 2), each empty."""
    return _request(b"\x12\x00" * count)


def one_span_of_events(count: int = SPANS) -> bytes:
    """One span holding `count` empty events (Span.events, field 11)."""
    return _request(_field(0x12, b"\x5a\x00" * count))


def one_span_of_attributes(count: int = SPANS) -> bytes:
    """One span holding `count` empty attributes (Span.attributes, field 9)."""
    return _request(_field(0x12, b"\x4a\x00" * count))


def one_array_attribute(count: int = SPANS) -> bytes:
    """One attribute whose value is an array of `count` empty values."""
    array = b"\x0a\x00" * count  # ArrayValue.values (1)
    any_value = _field(0x2A, array)  # AnyValue.array_value (5)
    key_value = _field(0x12, any_value)  # KeyValue.value (2)
    return _request(_field(0x12, _field(0x4A, key_value)))


def json_empty_spans(count: int = 1_600_000) -> bytes:
    """OTLP/JSON holding `count` empty span objects (4.8 MB)."""
    spans = b"[" + b",".join([b"{}"] * count) + b"]"
    return b'{"resourceSpans":[{"scopeSpans":[{"spans":' + spans + b"}]}]}"


PROTOBUF_BOMBS = {
    "traces: empty spans": ("traces", empty_spans),
    "traces: one span, empty events": ("traces", one_span_of_events),
    "traces: one span, empty attributes": ("traces", one_span_of_attributes),
    "traces: one array attribute": ("traces", one_array_attribute),
    "logs: empty log records": ("logs", empty_log_records),
}


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body, compresslevel=9)


def as_json(value: object) -> bytes:
    return json.dumps(value).encode()


def _string_attribute(key: str, value: str) -> bytes:
    any_value = _field(0x0A, value.encode())  # AnyValue.string_value (1)
    return _field(0x4A, _field(0x0A, key.encode()) + _field(0x12, any_value))  # Span.attributes (9)


def chat_span(span_id: int, messages: str, trace: bytes = b"\x0a" * 16) -> bytes:
    """A GenAI chat span (Span: trace_id 1, span_id 2, name 5) with `messages` as its input."""
    span = (_field(0x0A, trace) + _field(0x12, span_id.to_bytes(8, "big")) + _field(0x2A, b"chat")
            + _string_attribute("gen_ai.operation.name", "chat")
            + _string_attribute("gen_ai.input.messages", messages))
    return _field(0x12, span)


def messages_of_empty_objects(size: int = 4_800_000) -> bytes:
    """One chat span whose `gen_ai.input.messages` is `size` bytes of empty JSON objects."""
    return _request(chat_span(1, "[" + ",".join(["{}"] * (size // 3)) + "]"))


def spans_at_the_limit(count: int = 10_000) -> bytes:
    """`count` chat spans of one conversation, each with a short history: a request within every limit."""
    history = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Fix the failing login test"}]}])
    return _request(b"".join(chat_span(i + 1, history) for i in range(count)))
