"""Whole provider transcripts (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses) as
toolscope ingest events. Pure Python, no Django: data in, events out.

    mapped = map_transcript(body, received_at=now)   # raises TranscriptError(message, path)
    mapped.format, mapped.session_id, mapped.events
    map_transcript(body, received_at=now, max_calls=10_000)  # TranscriptTooLong past 10,000 calls or turns
"""

from api.transcripts.common import TranscriptError, TranscriptTooLong
from api.transcripts.detect import FORMATS, detect_format
from api.transcripts.mapping import MappedTranscript, map_transcript

__all__ = ["FORMATS", "MappedTranscript", "TranscriptError", "TranscriptTooLong", "detect_format", "map_transcript"]
