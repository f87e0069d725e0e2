"""How the commands print: kubectl-like tables, ``show`` as ``kubectl describe`` would, and the
same fields by name for ``-o json|yaml``. Pure: dead letters and counts in, text out.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import yaml

from dlq_engine.model import headers as h
from dlq_engine.model.dead_letter import DeadLetter
from spark_dlq_operator.kubectl_dlq.expired import Span, describe_spans, spans_total
from spark_dlq_operator.kubectl_dlq.letters import Stats
from spark_dlq_operator.kubectl_dlq.times import NONE, Window, format_time

MIN_MESSAGE_COLUMN: Final = 7

KEY_COLUMN_MAX: Final = 40


def one_line(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


def show_bytes(raw: bytes | None) -> str:
    """A key or header value for a table: its text when it is printable UTF-8, else ``0x`` hex."""
    if raw is None:
        return NONE
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()
    return text if text.isprintable() else "0x" + raw.hex()


def show_header(raw: bytes | None) -> str:
    """A header value on one line: its UTF-8 text with runs of white space made one space, else
    ``0x`` hex."""
    if raw is None:
        return NONE
    try:
        text = one_line(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "0x" + raw.hex()
    return text if text.isprintable() else "0x" + raw.hex()


def terminal_width(stream: Any) -> int | None:
    """The width to fit a table to: ``$COLUMNS``, else the terminal's; ``None`` (no limit) when
    the output is not a terminal, so a pipe gets whole messages."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return shutil.get_terminal_size().columns
    return None


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None) -> str:
    """Columns as kubectl prints them: left-aligned, three spaces apart. With ``width`` the last
    column is cut to fit (never below MIN_MESSAGE_COLUMN characters)."""
    sizes = [len(name) for name in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            sizes[i] = max(sizes[i], len(cell))
    lead = sum(sizes[:-1]) + 3 * (len(header) - 1)
    room = max(width - lead, MIN_MESSAGE_COLUMN) if width is not None else None
    lines = []
    for row in [list(header), *rows]:
        cells = [cell.ljust(sizes[i]) for i, cell in enumerate(row[:-1])]
        last = row[-1] if room is None else truncate(row[-1], room)
        lines.append("   ".join([*cells, last]).rstrip())
    return "\n".join(lines)


def ls_rows(letters: Sequence[DeadLetter], *, wide: bool) -> tuple[list[str], list[list[str]]]:
    header = ["TIME", "PARTITION/OFFSET", "KEY", "REASON", "CLASS"]
    if wide:
        header += ["ATTEMPT", "ORIGINAL", "REDRIVES"]
    header.append("MESSAGE")
    rows = []
    for letter in letters:
        key = show_bytes(letter.key)
        row = [
            format_time(letter.failed_at),
            letter.position,
            key if wide else truncate(key, KEY_COLUMN_MAX),
            letter.reason or NONE,
            letter.error_class or NONE,
        ]
        if wide:
            attempt, redrives = letter.attempt, letter.redrive_count
            row += [
                NONE if attempt is None else str(attempt),
                letter.original or NONE,
                "0" if redrives is None else str(redrives),
            ]
        row.append(one_line(letter.error_message or ""))
        rows.append(row)
    return header, rows


def encoded(raw: bytes | None, *, parse_json: bool) -> dict[str, Any]:
    """Bytes for JSON or YAML output: ``{"encoding": "json"|"text"|"hex"|"null", "data": ...}``."""
    if raw is None:
        return {"encoding": "null", "data": None}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"encoding": "hex", "data": raw.hex()}
    if parse_json:
        try:
            return {"encoding": "json", "data": json.loads(text)}
        except ValueError:
            pass
    return {"encoding": "text", "data": text}


def letter_document(letter: DeadLetter, *, topic: str, value: bool) -> dict[str, Any]:
    """A dead letter for ``-o json|yaml``: its position, the ``dlq.*`` fields by name, every
    header, and (for ``show``) its value."""
    document: dict[str, Any] = {
        "topic": topic,
        "partition": letter.partition,
        "offset": letter.offset,
        "timestamp": format_time(letter.timestamp, precise=True) if letter.timestamp is not None else None,
        "failedAt": format_time(letter.failed_at, precise=True) if letter.failed_at is not None else None,
        "reason": letter.reason,
        "errorClass": letter.error_class,
        "errorMessage": letter.error_message,
        "attempt": letter.attempt,
        "original": letter.original,
        "redriveCount": letter.redrive_count,
        "key": encoded(letter.key, parse_json=False),
        "headers": [{"name": name, **encoded(raw, parse_json=False)} for name, raw in letter.headers],
    }
    if value:
        document["value"] = encoded(letter.value, parse_json=True)
    return document


def expired_document(spans: Mapping[int, Sequence[Span]]) -> dict[str, Any]:
    """``expired`` (a count) and ``expiredRanges`` for ``-o json|yaml``."""
    return {
        "expired": spans_total(spans),
        "expiredRanges": [
            {"partition": partition, "first": first, "last": last}
            for partition, found in sorted(spans.items())
            for first, last in found
        ],
    }


def expired_line(spans: Mapping[int, Sequence[Span]], topic: str) -> str:
    """The warning ``ls`` and ``redrive`` print when dead letters of the topic expired."""
    return (
        f"warning: {spans_total(spans)} dead letters of {topic!r} expired before this read (the broker "
        f"deleted them: the topic's retention, or a deleteRecords): {describe_spans(spans)}"
    )


def stats_document(
    stats: Stats, *, topic: str, window: Window, expired: Mapping[int, Sequence[Span]] | None = None
) -> dict[str, Any]:
    both = sorted(stats.by_both.items(), key=lambda item: (-item[1], item[0]))
    return {
        "topic": topic,
        "after": format_time(window.after, precise=True) if window.after is not None else None,
        "before": format_time(window.before, precise=True) if window.before is not None else None,
        "total": stats.total,
        **expired_document(expired or {}),
        "oldest": format_time(stats.oldest, precise=True) if stats.oldest is not None else None,
        "newest": format_time(stats.newest, precise=True) if stats.newest is not None else None,
        "byReason": dict(ranked(stats.by_reason)),
        "byErrorClass": dict(ranked(stats.by_class)),
        "byReasonAndErrorClass": [
            {"reason": reason, "errorClass": cls, "count": n} for (reason, cls), n in both
        ],
    }


def ranked(counter: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))


def stats_text(
    stats: Stats, *, topic: str, window: Window, expired: Mapping[int, Sequence[Span]] | None = None
) -> str:
    if window.after is None and window.before is None:
        span = "all"
    else:
        start = format_time(window.after) if window.after is not None else ""
        end = format_time(window.before) if window.before is not None else "now"
        span = f"{start} .. {end}".strip()
    summary = [
        ["TOPIC", topic],
        ["RANGE", span],
        ["TOTAL", str(stats.total)],
        ["OLDEST", format_time(stats.oldest)],
        ["NEWEST", format_time(stats.newest)],
    ]
    if expired:
        summary.append(
            ["EXPIRED", f"{spans_total(expired)} (deleted by the broker: {describe_spans(expired)})"]
        )
    width = max(len(name) for name, _ in summary)
    parts = ["\n".join(f"{name.ljust(width)}   {value}" for name, value in summary)]
    if stats.total:
        parts.append(table(["REASON", "COUNT"], [[r, str(n)] for r, n in ranked(stats.by_reason)]))
        parts.append(table(["CLASS", "COUNT"], [[c, str(n)] for c, n in ranked(stats.by_class)]))
        both = sorted(stats.by_both.items(), key=lambda item: (-item[1], item[0]))
        parts.append(table(["REASON", "CLASS", "COUNT"], [[r, c, str(n)] for (r, c), n in both]))
    return "\n\n".join(parts)


def hexdump(raw: bytes) -> str:
    """16 bytes a line: offset, hex, and the printable ASCII (``.`` for the rest)."""
    lines = []
    for start in range(0, len(raw), 16):
        chunk = raw[start : start + 16]
        hexes = " ".join(f"{byte:02x}" for byte in chunk)
        text = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in chunk)
        lines.append(f"{start:08x}  {hexes.ljust(47)}  |{text}|")
    return "\n".join(lines)


def value_text(raw: bytes | None) -> tuple[str, str]:
    """How ``show`` prints a value: (what it is, the lines). JSON is indented, other UTF-8 text
    is shown as it is, anything else (or text with control characters) as a hex dump."""
    if raw is None:
        return "null", NONE
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or not all(char.isprintable() or char in "\n\r\t" for char in text):
        return f"binary, {len(raw)} bytes", hexdump(raw)
    try:
        parsed = json.loads(text)
    except ValueError:
        return f"text, {len(raw)} bytes", text
    return f"JSON, {len(raw)} bytes", json.dumps(parsed, indent=2, ensure_ascii=False)


def indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in text.splitlines()) or by + NONE


def show_text(letter: DeadLetter, *, topic: str) -> str:
    """One dead letter in the manner of ``kubectl describe``."""
    stamp = format_time(letter.timestamp, precise=True) if letter.timestamp is not None else NONE
    failed_at = letter.failed_at
    fields = [
        ("Topic", topic),
        ("Position", letter.position),
        ("Timestamp", stamp),
        ("Key", show_bytes(letter.key)),
        ("Failed at", format_time(failed_at, precise=True) if failed_at is not None else NONE),
        ("Reason", letter.reason or NONE),
        ("Error class", letter.error_class or NONE),
        ("Attempt", NONE if letter.attempt is None else str(letter.attempt)),
        ("Original", letter.original or NONE),
    ]
    if letter.redrive_count is not None:
        fields.append(("Redrives", str(letter.redrive_count)))
    width = max(len(name) for name, _ in fields) + 1
    lines = [f"{(name + ':').ljust(width)}  {value}" for name, value in fields]
    message = letter.error_message
    lines.append("Error message:")
    lines.append(indent(message) if message else "  " + NONE)
    lines.append("Headers:")
    shown = [(name, raw) for name, raw in letter.headers if name not in h.READ_ERROR_STACKTRACE]
    if shown:
        size = max(len(name) for name, _ in shown) + 1
        for name, raw in shown:
            lines.append(f"  {(name + ':').ljust(size)}  {show_header(raw)}")
    else:
        lines.append("  " + NONE)
    kind, body = value_text(letter.value)
    lines.append(f"Value ({kind}):")
    lines.append(indent(body))
    trace = letter.stacktrace
    lines.append("Stack trace:")
    lines.append(indent(trace.rstrip("\n")) if trace else "  " + NONE)
    return "\n".join(lines)


def dump(document: object, output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True).rstrip("\n")
