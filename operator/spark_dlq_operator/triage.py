"""``kubectl dlq``: look at a DeadLetterPolicy's dead letters from a laptop.

    kubectl dlq stats (-f policy.yaml | --policy NAME [-n NS]) [--since 1h | --after T] [--before T]
    kubectl dlq ls    (-f ... | --policy ...) [--reason R]... [--error-class C]... [--key K] [--limit N]
    kubectl dlq show  (-f ... | --policy ...) PARTITION/OFFSET

Installed as the executable ``kubectl-dlq`` (pyproject.toml), which kubectl runs as a plugin.
The policy names the broker (one that names none gets its class's, as the operator gives it)
and the dead-letter topic; the topic is read by a consumer that is assigned its partitions and
never commits (its group id is never joined), from the offsets where
the time range starts up to the end offsets taken when the command starts, so a topic still
being written to is read to a fixed point and the command ends. Dead letters the broker no longer
holds (deleted by the topic's retention or a deleteRecords, before the read or while it ran) are
counted and named as expired. Exit status: 0 done, 1 the broker or the cluster could not be
reached or refused, 2 bad input (one line naming the problem).
docs/reference.md, "Triage: kubectl dlq", is the user's reference.
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from dlq_engine.model.documents import PolicyFileError, load_policy_file, load_policy_text
from dlq_engine.model.durations import DurationError, parse_duration_ms
from dlq_engine.model.policy import DeadLetterPolicy, PolicyError
from dlq_engine.model.reasons import DEAD_LETTER_REASONS
from dlq_engine.model.redrive import (
    DESTINATION_TYPES,
    DeadLetterRedrive,
    parse_redrive,
    redrive_to_document,
    rfc3339,
)
from dlq_engine.routing import headers as h
from spark_dlq_operator.governance import govern_broker
from spark_dlq_operator.policy_class import ClassRefusal, read_class, select_class

PROG: Final = "kubectl dlq"
#: The consumer's group id: required by librdkafka, never joined (partitions are assigned) and
#: never committed to, so a triage run leaves no trace on the cluster.
GROUP_ID: Final = "kubectl-dlq"
#: Dead letters are written after their ``dlq.failed.at`` is taken, so a record's Kafka timestamp
#: is at least its failure time; a time range is sought from this much before its start, which
#: covers clock skew between the engine's executors and the broker (LogAppendTime topics).
SEEK_MARGIN_MS: Final = 5 * 60_000
#: Shown for a missing key, header or value, as kubectl shows a missing field.
NONE: Final = "<none>"
MIN_MESSAGE_COLUMN: Final = 7
KEY_COLUMN_MAX: Final = 40
#: A scan of this many records or more shows its progress on a terminal's stderr (about a
#: second's reading or more), every PROGRESS_INTERVAL_S.
LARGE_SCAN: Final = 20_000
PROGRESS_INTERVAL_S: Final = 0.25

EXIT_OK: Final = 0
EXIT_UNREACHABLE: Final = 1
EXIT_BAD_INPUT: Final = 2

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_POSITION_RE = re.compile(r"^(\d+)/(\d+)$")


class TriageError(Exception):
    """An expected failure: its message is printed as one ``error: ...`` line, then the command
    exits with ``status``."""

    status = EXIT_UNREACHABLE


class BadInput(TriageError):
    """Something the user gave (a flag, a file, a name, a position) cannot be used."""

    status = EXIT_BAD_INPUT


class Unreachable(TriageError):
    """The broker or the cluster could not be reached, or refused what was asked."""

    status = EXIT_UNREACHABLE


# ---------------------------------------------------------------------------------------------
# Input: times, ranges, positions, client properties


def parse_time(text: str, *, flag: str) -> int:
    """An ISO-8601 time (``2026-11-24T10:15:00Z``, ``2026-11-24``) as epoch milliseconds; a time
    without a zone is UTC, as every time this command prints is."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"{flag}: must be an ISO-8601 time such as 2026-11-24T10:15:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Window:
    """The failure times a command looks at: ``after`` inclusive, ``before`` exclusive, epoch ms;
    ``None`` is open."""

    after: int | None = None
    before: int | None = None

    def __contains__(self, ms: object) -> bool:
        """An open window holds every record, even one without a time."""
        if self.after is None and self.before is None:
            return True
        if not isinstance(ms, int):
            return False
        return (self.after is None or ms >= self.after) and (self.before is None or ms < self.before)


def parse_window(since: str | None, after: str | None, before: str | None, *, now_ms: int) -> Window:
    """The window of ``--since DURATION`` or ``--after TIME``, and ``--before TIME``."""
    if since is not None and after is not None:
        raise BadInput("give --since or --after, not both")
    start = None
    if since is not None:
        try:
            span = parse_duration_ms(since)
        except DurationError as error:
            raise BadInput(f"--since: {error}") from None
        if span <= 0:
            raise BadInput(f"--since: must be longer than 0, got {since!r}")
        start = now_ms - span
    elif after is not None:
        start = parse_time(after, flag="--after")
    end = parse_time(before, flag="--before") if before is not None else None
    if start is not None and end is not None and start >= end:
        raise BadInput(f"the range is empty: {format_time(start)} is not before {format_time(end)}")
    return Window(start, end)


def parse_position(text: str) -> tuple[int, int]:
    """``PARTITION/OFFSET`` (``2/1534``), as ``ls`` prints it."""
    match = _POSITION_RE.match(text.strip())
    if not match:
        raise BadInput(f"the position must be PARTITION/OFFSET such as 2/1534, got {text!r}")
    return int(match.group(1)), int(match.group(2))


def read_kafka_config(path: str) -> dict[str, str]:
    """librdkafka properties from a file of ``key=value`` lines (``#`` starts a comment)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise BadInput(f"--kafka-config {path}: {reason or error}") from None
    properties: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--kafka-config {path}:{number}: expected key=value, got {line!r}")
        properties[key.strip()] = value.strip()
    return properties


# ---------------------------------------------------------------------------------------------
# Where the dead letters are: the policy, from a file or from the cluster


@dataclass(frozen=True, slots=True)
class Target:
    """The topic to read and the Kafka client properties to read it with. ``broker_origin`` says
    where ``bootstrap.servers`` came from, for the message when it cannot be reached."""

    topic: str
    client: Mapping[str, str]
    broker_origin: str


def policy_from_file(path: str) -> DeadLetterPolicy:
    try:
        if path == "-":
            return load_policy_text(sys.stdin.read(), source="<stdin>")
        return load_policy_file(path)
    except PolicyFileError as error:
        raise BadInput(str(error).replace("\n", "; ")) from None


def kubectl_command(
    name: str | None,
    *,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    timeout_ms: int,
    resource: str = "deadletterpolicies.sparkdlq.io",
) -> list[str]:
    """The ``kubectl get`` that reads one DeadLetterPolicy (or every object of ``resource`` when
    ``name`` is None) as YAML, with the connection flags a plugin was given passed on (kubectl
    gives a plugin its flags, it does not apply them)."""
    command = [os.environ.get("KUBECTL") or "kubectl"]
    if kubeconfig:
        command.append(f"--kubeconfig={kubeconfig}")
    if context:
        command.append(f"--context={context}")
    if namespace:
        command.append(f"--namespace={namespace}")
    command.append(f"--request-timeout={max(timeout_ms // 1000, 1)}s")
    command += ["get", resource, *([name] if name else []), "-o", "yaml"]
    return command


@dataclass(frozen=True, slots=True)
class ClusterPolicy:
    """A policy read from the cluster, with its broker as the operator settles it."""

    policy: DeadLetterPolicy
    #: Where ``spec.broker`` came from when the policy names none (its class); None: its own.
    broker_origin: str | None = None


def policy_from_cluster(
    name: str,
    *,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    timeout_ms: int,
    bootstrap_servers: str | None = None,
) -> ClusterPolicy:
    """The DeadLetterPolicy ``name``. One that names no broker gets its class's, as the operator
    gives it (``spec.className``, else the default class: ``class_broker``); the classes are read
    only then, and not at all when ``bootstrap_servers`` (the user's own) is given."""
    if not _NAME_RE.match(name):
        raise BadInput(f"--policy: {name!r} is not a valid resource name")
    if namespace is not None and not _NAME_RE.match(namespace):
        raise BadInput(f"--namespace: {namespace!r} is not a valid namespace name")
    command = kubectl_command(
        name, namespace=namespace, kubeconfig=kubeconfig, context=context, timeout_ms=timeout_ms
    )
    stdout = run_kubectl(
        command,
        what=f"kubectl get deadletterpolicy {name}",
        why="--policy reads the policy with it; -f reads a file",
        timeout_ms=timeout_ms,
    )
    where = f"deadletterpolicy {namespace + '/' if namespace else ''}{name}"
    try:
        document = yaml.safe_load(stdout)
    except yaml.YAMLError:
        document = None  # load_policy_text names the problem
    spec = document.get("spec") if isinstance(document, dict) else None
    origin: str | None = None
    if isinstance(spec, dict) and spec.get("broker") is None:
        if bootstrap_servers:
            spec["broker"] = {"bootstrapServers": bootstrap_servers}
        else:
            listed = run_kubectl(
                kubectl_command(
                    None,
                    namespace=None,
                    kubeconfig=kubeconfig,
                    context=context,
                    timeout_ms=timeout_ms,
                    resource="deadletterpolicyclasses.sparkdlq.io",
                ),
                what="kubectl get deadletterpolicyclasses",
                why="the policy names no broker (spec.broker): its class's is read",
                timeout_ms=timeout_ms,
            )
            classes = (yaml.safe_load(listed) or {}).get("items") or []
            spec["broker"], origin = class_broker(document, classes, where=where)
        stdout = yaml.safe_dump(document)
    try:
        return ClusterPolicy(load_policy_text(stdout, source=where), origin)
    except PolicyFileError as error:
        raise BadInput(str(error).replace("\n", "; ")) from None


def class_broker(
    document: Mapping[str, Any], classes: Sequence[Mapping[str, Any]], *, where: str
) -> tuple[dict[str, Any], str]:
    """The ``spec.broker`` the operator gives the policy ``document``, which names none, from its
    class among ``classes`` (the cluster's DeadLetterPolicyClass objects), and a note on where it
    came from. Raises BadInput naming the field and the class's rule when there is none."""
    try:
        cls = select_class(document, [read_class(c) for c in classes])
        broker, entry = govern_broker(document, cls)
    except ClassRefusal as refusal:
        problems = "; ".join(str(issue) for issue in refusal.issues)
        hint = (
            " (no DeadLetterPolicyClass in the cluster: the operator's built-in class, whose "
            "--kafka-config-brokers kubectl dlq cannot see)"
            if not classes and not document.get("spec", {}).get("className")
            else ""
        )
        raise BadInput(f"{where}: {problems}{hint}; give the broker with --bootstrap-servers") from None
    assert entry is not None  # a policy with no broker gets its class's first one, or is refused
    index = cls.brokers.index(entry)
    return (
        broker,
        f"spec.brokers[{index}] of class {cls.name!r}, the broker of {where}; --bootstrap-servers overrides it",
    )


def run_kubectl(command: list[str], *, what: str, why: str, timeout_ms: int, input: str | None = None) -> str:
    """Run kubectl as a plugin does; its standard output. A missing kubectl, no answer or a
    refusal is one line naming ``what`` (a NotFound is bad input, anything else unreachable)."""
    try:
        done = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout_ms / 1000 + 30, check=False
        )
    except FileNotFoundError:
        raise Unreachable(f"{command[0]} is not on the PATH ({why})") from None
    except subprocess.TimeoutExpired:
        raise Unreachable(f"{what} did not answer") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        said = lines[-1] if lines else f"exit status {done.returncode}"
        error = BadInput if "(NotFound)" in said else Unreachable
        raise error(f"{what}: {said}")
    return done.stdout


def target_for(
    policy: DeadLetterPolicy,
    *,
    bootstrap_servers: str | None,
    kafka_config: str | None,
    broker_origin: str | None = None,
) -> Target:
    """The dead-letter topic of ``policy`` and how to reach its broker: ``--bootstrap-servers``
    over ``bootstrap.servers`` in ``--kafka-config`` over the policy's address (its own, or
    its class's: ``broker_origin``)."""
    if policy.is_pulsar:
        raise BadInput(
            f"{policy.qualified_name} is a Pulsar policy (spec.broker.type pulsar): kubectl dlq reads "
            "Kafka dead-letter topics only, for now"
        )
    client = {"bootstrap.servers": policy.broker.bootstrap_servers}
    origin = (
        broker_origin
        or f"spec.broker.bootstrapServers of {policy.qualified_name}; --bootstrap-servers overrides it"
    )
    if kafka_config:
        properties = read_kafka_config(kafka_config)
        client.update(properties)
        if "bootstrap.servers" in properties:
            origin = f"bootstrap.servers in {kafka_config}"
    if bootstrap_servers is not None:
        if not bootstrap_servers.strip():
            raise BadInput("--bootstrap-servers: must not be empty")
        client["bootstrap.servers"] = bootstrap_servers.strip()
        origin = "--bootstrap-servers"
    return Target(topic=policy.dead_letter_topic, client=client, broker_origin=origin)


# ---------------------------------------------------------------------------------------------
# A dead letter


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    return raw.decode("utf-8", "replace")


def _int(raw: bytes | None) -> int | None:
    try:
        return int(raw.decode("ascii")) if raw is not None else None
    except (UnicodeDecodeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record of the dead-letter topic. ``timestamp`` is the record's Kafka timestamp (ms)."""

    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    def header(self, name: str) -> bytes | None:
        return h.first_header(list(self.headers), name)

    @property
    def position(self) -> str:
        return f"{self.partition}/{self.offset}"

    @property
    def failed_at(self) -> int | None:
        """``dlq.failed.at``; the record's timestamp when the header is missing or unreadable."""
        failed = _int(self.header(h.FAILED_AT))
        return failed if failed is not None else self.timestamp

    @property
    def reason(self) -> str | None:
        return _text(self.header(h.REASON))

    @property
    def error_class(self) -> str | None:
        """``dlq.error.class``, or Spring's, Kafka Connect's or Kafka Streams' (h.READ_ERROR_CLASS)."""
        return h.read_text(self.headers, h.READ_ERROR_CLASS)

    @property
    def error_message(self) -> str | None:
        return h.read_text(self.headers, h.READ_ERROR_MESSAGE)

    @property
    def stacktrace(self) -> str | None:
        return h.read_text(self.headers, h.READ_ERROR_STACKTRACE)

    @property
    def attempt(self) -> int | None:
        """``dlq.attempt``, or a share group's delivery count (h.READ_ATTEMPT)."""
        return h.read_number(self.headers, h.READ_ATTEMPT)

    @property
    def redrive_count(self) -> int | None:
        return _int(self.header(h.REDRIVE_COUNT))

    @property
    def original(self) -> str | None:
        """``topic/partition/offset`` where the message was first read: from the ``dlq.original.*``
        headers, or Spring's, Kafka Connect's, Kafka Streams' or a share group's
        (``h.READ_ORIGINAL_*``)."""
        topic = h.read_text(self.headers, h.READ_ORIGINAL_TOPIC)
        if topic is None:
            return None
        partition = h.read_number(self.headers, h.READ_ORIGINAL_PARTITION)
        offset = h.read_number(self.headers, h.READ_ORIGINAL_OFFSET)
        return f"{topic}/{'?' if partition is None else partition}/{'?' if offset is None else offset}"

    def summary(self) -> DeadLetter:
        """The same dead letter without its value, to keep many in memory."""
        return DeadLetter(self.partition, self.offset, self.timestamp, self.key, None, self.headers)


@dataclass(frozen=True, slots=True)
class Filters:
    """What ``ls`` keeps: every given field must match; a repeated flag matches any of its
    values. An error class matches by its full name or its last dotted part."""

    window: Window = field(default_factory=Window)
    reasons: frozenset[str] = frozenset()
    error_classes: frozenset[str] = frozenset()
    key: str | None = None

    def __call__(self, letter: DeadLetter) -> bool:
        if letter.failed_at not in self.window:
            return False
        if self.reasons and letter.reason not in self.reasons:
            return False
        if self.error_classes:
            cls = letter.error_class
            if cls is None or (
                cls not in self.error_classes and cls.rsplit(".", 1)[-1] not in self.error_classes
            ):
                return False
        if self.key is not None:
            return letter.key is not None and letter.key == self.key.encode("utf-8")
        return True


def _order(letter: DeadLetter) -> tuple[int, int, int]:
    failed = letter.failed_at
    return (failed if failed is not None else -1, letter.partition, letter.offset)


def select(letters: Iterable[DeadLetter], filters: Filters, limit: int | None) -> list[DeadLetter]:
    """The dead letters ``filters`` keeps, oldest failure first; with ``limit`` only the newest
    ``limit`` of them (the last lines of the whole list)."""
    kept = (letter.summary() for letter in letters if filters(letter))
    if limit is None:
        return sorted(kept, key=_order)
    return sorted(heapq.nlargest(limit, kept, key=_order), key=_order)


@dataclass(slots=True)
class Stats:
    """Counts over the dead letters in a window, built one record at a time."""

    total: int = 0
    oldest: int | None = None
    newest: int | None = None
    by_reason: Counter[str] = field(default_factory=Counter)
    by_class: Counter[str] = field(default_factory=Counter)
    by_both: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, letter: DeadLetter) -> None:
        reason, cls = letter.reason or NONE, letter.error_class or NONE
        self.total += 1
        self.by_reason[reason] += 1
        self.by_class[cls] += 1
        self.by_both[(reason, cls)] += 1
        failed = letter.failed_at
        if failed is not None:
            self.oldest = failed if self.oldest is None else min(self.oldest, failed)
            self.newest = failed if self.newest is None else max(self.newest, failed)


def count(letters: Iterable[DeadLetter], window: Window) -> Stats:
    stats = Stats()
    for letter in letters:
        if letter.failed_at in window:
            stats.add(letter)
    return stats


class Progress:
    """One line on stderr, rewritten in place, while a scan of a large range goes on: only on a
    terminal (a pipe or a log gets nothing), only for LARGE_SCAN records or more, at most every
    PROGRESS_INTERVAL_S seconds; the line is cleared when the scan ends."""

    def __init__(self, stream: Any, *, label: str, clock: Callable[[], float] = time.monotonic) -> None:
        isatty = getattr(stream, "isatty", None)
        self.stream = stream if isatty is not None and isatty() else None
        self.label = label
        self.clock = clock
        self.shown = False
        self.last = float("-inf")

    def __call__(self, done: int, total: int) -> None:
        if self.stream is None or total < LARGE_SCAN:
            return
        now = self.clock()
        if now - self.last < PROGRESS_INTERVAL_S and done < total:
            return
        self.last = now
        self.stream.write(f"\r{self.label}: {done:,} of {total:,} records ({100 * done // total}%)\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown and self.stream is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


#: Offsets ``first``..``last`` of a partition, inclusive.
Span = tuple[int, int]


def expired_spans(lows: Mapping[int, int], jumps: Mapping[int, Sequence[Span]]) -> dict[int, list[Span]]:
    """The offsets of the dead-letter topic the broker no longer holds, per partition: those
    before its first kept offset (``lows``, as the read ends), and of the offsets a read skipped
    (``jumps``) those below it (the rest are transaction markers or compacted away)."""
    found: dict[int, list[Span]] = {}
    for partition, low in sorted(lows.items()):
        spans = [(0, low - 1)] if low > 0 else []
        for first, last in jumps.get(partition, ()):
            if first < low and first > (spans[-1][1] if spans else -1):
                spans.append((first, min(last, low - 1)))
        if spans:
            found[partition] = spans
    return found


def describe_spans(spans: Mapping[int, Sequence[Span]], *, most: int = 5) -> str:
    """``0/0-2, 1/0-4`` (PARTITION/OFFSETS, as ``ls`` prints positions)."""
    parts = [
        f"{partition}/{first}" + (f"-{last}" if last > first else "")
        for partition, found in sorted(spans.items())
        for first, last in found
    ]
    more = f", and {len(parts) - most} more" if len(parts) > most else ""
    return ", ".join(parts[:most]) + more


def spans_total(spans: Mapping[int, Sequence[Span]]) -> int:
    return sum(last - first + 1 for found in spans.values() for first, last in found)


# ---------------------------------------------------------------------------------------------
# Reading the topic


class DeadLetterTopic:
    """A consumer on one dead-letter topic: assigned partitions, no group membership, no
    commits. ``timeout_ms`` bounds each request and each wait for the next record."""

    def __init__(self, target: Target, *, timeout_ms: int) -> None:
        self.target = target
        self.topic = target.topic
        self.timeout = timeout_ms / 1000
        self._errors: list[str] = []
        quiet = logging.getLogger("spark_dlq_operator.triage.librdkafka")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        settings: dict[str, Any] = {
            "client.id": GROUP_ID,
            **target.client,
            "group.id": GROUP_ID,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "error_cb": self._on_error,
            "logger": quiet,
        }
        try:
            self.consumer = Consumer(settings)
        except KafkaException as error:
            raise BadInput(f"Kafka client settings: {error.args[0].str()}") from None
        except (TypeError, ValueError) as error:
            raise BadInput(f"Kafka client settings: {error}") from None
        self._partitions: list[int] | None = None
        #: After ``read``: the offsets of each partition the broker no longer held (``expired_spans``).
        self.expired: dict[int, list[Span]] = {}

    def _on_error(self, error: KafkaError) -> None:
        if error.code() != KafkaError._ALL_BROKERS_DOWN:
            self._errors.append(str(error.str()))

    @property
    def broker(self) -> str:
        return f"the Kafka broker at {self.target.client.get('bootstrap.servers', '')}"

    def _unreachable(self, what: str, error: KafkaException | None = None) -> Unreachable:
        """``what`` names the broker (``self.broker``); the first error librdkafka reported
        (served by ``poll``) says why, e.g. ``Connection refused``."""
        self.consumer.poll(0)
        detail = self._errors[0] if self._errors else (error.args[0].str() if error else "no answer")
        return Unreachable(f"{what} ({self.target.broker_origin}): {detail}")

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> DeadLetterTopic:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[int]:
        if self._partitions is None:
            try:
                metadata = self.consumer.list_topics(self.topic, timeout=self.timeout)
            except KafkaException as error:
                raise self._unreachable(f"cannot reach {self.broker}", error) from None
            topic = metadata.topics.get(self.topic)
            if topic is None or topic.error is not None:
                code = topic.error.code() if topic is not None and topic.error is not None else None
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise Unreachable(f"the dead-letter topic {self.topic!r} does not exist on {self.broker}")
                said = topic.error.str() if topic is not None and topic.error is not None else "not listed"
                raise Unreachable(f"cannot read the dead-letter topic {self.topic!r}: {said}")
            self._partitions = sorted(topic.partitions)
        return self._partitions

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """partition -> (first offset kept, next offset to be written)."""
        marks = {}
        for partition in self.partitions():
            try:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=self.timeout, cached=False
                )
            except KafkaException as error:
                raise self._unreachable(
                    f"cannot read the offsets of {self.topic!r} from {self.broker}", error
                ) from None
            marks[partition] = (int(low), int(high))
        return marks

    def starts(self, window: Window, marks: Mapping[int, tuple[int, int]]) -> dict[int, int]:
        """Where each partition's reading starts: its first offset, or the first record whose
        timestamp is within SEEK_MARGIN_MS of the window's start."""
        if window.after is None:
            return {p: low for p, (low, _) in marks.items()}
        wanted = [TopicPartition(self.topic, p, max(window.after - SEEK_MARGIN_MS, 0)) for p in marks]
        try:
            found = self.consumer.offsets_for_times(wanted, timeout=self.timeout)
        except KafkaException as error:
            raise self._unreachable(
                f"cannot look up offsets by time in {self.topic!r} on {self.broker}", error
            ) from None
        starts = {}
        for tp in found:
            low, high = marks[tp.partition]
            # -1: no record that late; start at the end, so nothing is read.
            starts[tp.partition] = high if tp.offset < 0 else max(int(tp.offset), low)
        return starts

    def read(
        self, window: Window = Window(), *, progress: Callable[[int, int], None] | None = None
    ) -> Iterator[DeadLetter]:
        """Every record from the window's start up to the end offsets taken now; ``progress``
        hears ``(records read, records to read)`` after each batch the consumer returns. Once
        read, ``expired`` holds what the broker no longer had."""
        marks = self.watermarks()
        ends = {p: high for p, (_, high) in marks.items()}
        starts = self.starts(window, marks)
        remaining = {p for p in ends if starts[p] < ends[p]}
        self.expired = expired_spans({p: low for p, (low, _) in marks.items()}, {})
        if not remaining:
            return
        jumps: dict[int, list[Span]] = {}
        expected = dict(starts)
        yield from self._records(starts, ends, set(remaining), expected, jumps, progress)
        for partition in sorted(remaining):  # a partition's last offsets, when none was read
            if expected[partition] < ends[partition]:
                jumps.setdefault(partition, []).append((expected[partition], ends[partition] - 1))
        if jumps:  # deleted while it was read, or transaction markers: the first kept offsets say
            lows = {p: low for p, (low, _) in self.watermarks().items()}
            self.expired = expired_spans(lows, jumps)

    def _records(
        self,
        starts: Mapping[int, int],
        ends: Mapping[int, int],
        remaining: set[int],
        expected: dict[int, int],
        jumps: dict[int, list[Span]],
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[DeadLetter]:
        """The records of ``[starts, ends)``; an offset read past the one ``expected`` next (the
        consumer goes on from the first kept offset when the next is gone) is noted in ``jumps``."""
        total = sum(ends[p] - starts[p] for p in remaining)
        done = 0
        self.consumer.assign([TopicPartition(self.topic, p, starts[p]) for p in sorted(remaining)])
        last_progress = time.monotonic()
        while remaining:
            batch = self.consumer.consume(500, timeout=0.5)
            if batch:
                last_progress = time.monotonic()
                done += len(batch)
                if progress is not None:
                    progress(min(done, total), total)
            elif time.monotonic() - last_progress > self.timeout:
                raise self._unreachable(
                    f"no records from {self.broker} for {self.timeout:g}s reading {self.topic!r} "
                    f"(partitions {', '.join(map(str, sorted(remaining)))})"
                )
            for message in batch:
                partition = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(partition)
                        continue
                    raise Unreachable(f"reading {self.topic!r} partition {partition}: {error.str()}")
                letter = _letter(message)
                if partition not in remaining or letter.offset >= ends[partition]:
                    continue
                if letter.offset > expected[partition]:
                    jumps.setdefault(partition, []).append((expected[partition], letter.offset - 1))
                expected[partition] = letter.offset + 1
                if letter.offset >= ends[partition] - 1:
                    remaining.discard(partition)
                yield letter

    def fetch(self, partition: int, offset: int) -> DeadLetter:
        """The record at ``partition/offset``."""
        partitions = self.partitions()
        if partition not in partitions:
            raise BadInput(
                f"partition {partition} does not exist in {self.topic!r} (partitions 0-{max(partitions)})"
            )
        low, high = self.watermarks()[partition]
        if not low <= offset < high:
            kept = f"offsets {low}-{high - 1}" if high > low else "no records"
            gone = (
                f" (the broker deleted those below {low}: the topic's retention, or a deleteRecords)"
                if offset < low
                else ""
            )
            raise BadInput(
                f"no record at {partition}/{offset}: partition {partition} of {self.topic!r} has {kept}{gone}"
            )
        self.consumer.assign([TopicPartition(self.topic, partition, offset)])
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise Unreachable(f"reading {self.topic!r} partition {partition}: {error.str()}")
            if message.offset() == offset:
                return _letter(message)
            break
        else:
            raise self._unreachable(
                f"no answer from {self.broker} reading {partition}/{offset} of {self.topic!r}"
            )
        raise BadInput(
            f"no record at {partition}/{offset} of {self.topic!r} (a transaction marker, or compacted away)"
        )


def _letter(message: Any) -> DeadLetter:
    kind, stamp = message.timestamp()
    return DeadLetter(
        partition=int(message.partition()),
        offset=int(message.offset()),
        timestamp=int(stamp) if kind != 0 and stamp >= 0 else None,  # 0: TIMESTAMP_NOT_AVAILABLE
        key=message.key(),
        value=message.value(),
        headers=tuple(message.headers() or ()),
    )


# ---------------------------------------------------------------------------------------------
# Output


def format_time(ms: int | None, *, precise: bool = False) -> str:
    """Epoch milliseconds as ISO-8601 UTC: seconds for tables, milliseconds when ``precise``."""
    if ms is None:
        return NONE
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    if precise:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    ranked = sorted(stats.by_both.items(), key=lambda item: (-item[1], item[0]))
    return {
        "topic": topic,
        "after": format_time(window.after, precise=True) if window.after is not None else None,
        "before": format_time(window.before, precise=True) if window.before is not None else None,
        "total": stats.total,
        **expired_document(expired or {}),
        "oldest": format_time(stats.oldest, precise=True) if stats.oldest is not None else None,
        "newest": format_time(stats.newest, precise=True) if stats.newest is not None else None,
        "byReason": dict(_ranked(stats.by_reason)),
        "byErrorClass": dict(_ranked(stats.by_class)),
        "byReasonAndErrorClass": [
            {"reason": reason, "errorClass": cls, "count": n} for (reason, cls), n in ranked
        ],
    }


def _ranked(counter: Counter[str]) -> list[tuple[str, int]]:
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
        parts.append(table(["REASON", "COUNT"], [[r, str(n)] for r, n in _ranked(stats.by_reason)]))
        parts.append(table(["CLASS", "COUNT"], [[c, str(n)] for c, n in _ranked(stats.by_class)]))
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


def _indent(text: str, by: str = "  ") -> str:
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
    lines.append(_indent(message) if message else "  " + NONE)
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
    lines.append(_indent(body))
    trace = letter.stacktrace
    lines.append("Stack trace:")
    lines.append(_indent(trace.rstrip("\n")) if trace else "  " + NONE)
    return "\n".join(lines)


def dump(document: object, output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True).rstrip("\n")


# ---------------------------------------------------------------------------------------------
# The command line


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as kubectl does: one ``error:`` line, status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see '{self.prog} --help')\n")


#: Options every command takes, before or after the command's name; their defaults.
_COMMON_DEFAULTS: Final[dict[str, Any]] = {
    "file": None,
    "policy": None,
    "namespace": None,
    "kubeconfig": None,
    "context": None,
    "bootstrap_servers": None,
    "kafka_config": None,
    "request_timeout": "10s",
}


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option given before the command is not reset by the command's own default.
    s = argparse.SUPPRESS
    where = parser.add_argument_group("the policy (one of -f, --policy)")
    where.add_argument(
        "-f",
        "--filename",
        dest="file",
        metavar="FILE",
        default=s,
        help="the DeadLetterPolicy YAML, as applied ('-' reads standard input)",
    )
    where.add_argument(
        "--policy",
        metavar="NAME",
        default=s,
        help="read the DeadLetterPolicy NAME from the cluster with kubectl",
    )
    where.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        default=s,
        help="the policy's namespace (default: the kubeconfig context's)",
    )
    where.add_argument("--kubeconfig", metavar="FILE", default=s, help="passed to kubectl")
    where.add_argument("--context", metavar="NAME", default=s, help="passed to kubectl")
    kafka = parser.add_argument_group("Kafka")
    kafka.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT,...",
        default=s,
        help="the broker to read from instead of the policy's spec.broker.bootstrapServers",
    )
    kafka.add_argument(
        "--kafka-config",
        metavar="FILE",
        default=s,
        help="librdkafka properties, key=value lines (security.protocol, sasl.*, ssl.*)",
    )
    kafka.add_argument("--request-timeout", metavar="DURATION", default=s,
                       help="how long to wait for the broker or the cluster (default 10s)")  # fmt: skip


def _range(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("time range (by dlq.failed.at)")
    group.add_argument("--since", metavar="DURATION", help="the last DURATION (1h, 30m, 2d)")
    group.add_argument("--after", metavar="TIME", help="failed at or after TIME (ISO-8601; UTC if no zone)")
    group.add_argument("--before", metavar="TIME", help="failed before TIME (ISO-8601; UTC if no zone)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Triage the dead letters of a DeadLetterPolicy.",
        epilog="Exit status: 0 done, 1 the broker or cluster could not be reached, 2 bad input.",
    )
    _common(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    stats = commands.add_parser(
        "stats", help="counts by reason and error class", description="Counts by reason and error class."
    )
    _common(stats)
    _range(stats)
    stats.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every DeadLetterPolicy of the cluster (with -n: of that namespace), one row each",
    )
    stats.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")

    ls = commands.add_parser(
        "ls", help="list dead letters, newest last", description="List dead letters, newest last."
    )
    _common(ls)
    _range(ls)
    ls.add_argument(
        "--reason",
        action="append",
        default=[],
        metavar="R",
        help=f"only this dlq.reason: {', '.join(DEAD_LETTER_REASONS)} (repeatable: any of them)",
    )
    ls.add_argument(
        "--error-class",
        action="append",
        default=[],
        metavar="C",
        help="only this dlq.error.class, by full or last dotted name (repeatable)",
    )
    ls.add_argument("--key", metavar="K", help="only records with this key (UTF-8)")
    ls.add_argument("--limit", type=_positive, metavar="N", help="only the newest N")
    ls.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table")  # fmt: skip

    show = commands.add_parser(
        "show",
        help="one dead letter: headers, value, stack trace",
        description="One dead letter: headers, value, stack trace.",
    )
    _common(show)
    show.add_argument("position", metavar="PARTITION/OFFSET", help="as ls prints it, e.g. 2/1534")
    show.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")

    redrive = commands.add_parser(
        "redrive",
        help="send dead letters back (a DeadLetterRedrive); by default only shows what would move",
        description="Select dead letters and show what a DeadLetterRedrive would send back, counted "
        "from the dead-letter topic here; with --execute, create that DeadLetterRedrive (kubectl "
        "create) and let the operator run it.",
    )
    _common(redrive)
    _range(redrive)
    redrive.add_argument(
        "--reason",
        action="append",
        default=[],
        metavar="R",
        help=f"only this dlq.reason: {', '.join(DEAD_LETTER_REASONS)} (repeatable)",
    )
    redrive.add_argument(
        "--error-class", action="append", default=[], metavar="C", help="only this error class (repeatable)"
    )
    redrive.add_argument("--key", action="append", default=[], metavar="K", help="only this key (repeatable)")
    redrive.add_argument(
        "--filter",
        metavar="SQL",
        help="a Spark SQL condition over the dead-letter columns (evaluated by the job)",
    )
    redrive.add_argument(
        "--to",
        default="source",
        metavar="DEST",
        help="source (default: back through the processor, attempts reset), retry, or topic:NAME",
    )
    redrive.add_argument(
        "--rate", type=float, default=0.0, metavar="N", help="messages per second at most (0: no limit)"
    )
    redrive.add_argument(
        "--max-redrives", type=_positive, default=3, metavar="N", help="the loop guard (default 3)"
    )
    redrive.add_argument(
        "--name", metavar="NAME", help="the DeadLetterRedrive's name (default: <policy>-redrive-<time>)"
    )
    redrive.add_argument(
        "--execute", action="store_true", help="create the DeadLetterRedrive (without it nothing is written)"
    )
    redrive.add_argument("-o", "--output", choices=("text", "yaml"), default="text")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    for name, default in _COMMON_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


def _target(args: argparse.Namespace, timeout_ms: int) -> Target:
    return _located(args, timeout_ms)[1]


def _located(args: argparse.Namespace, timeout_ms: int) -> tuple[DeadLetterPolicy, Target]:
    """The policy (-f or --policy, read once) and where its dead letters are."""
    if (args.file is None) == (args.policy is None):
        raise BadInput("give the policy as -f FILE or as --policy NAME (one of them)")
    origin = None
    if args.file is not None:
        policy = policy_from_file(args.file)
    else:
        found = policy_from_cluster(
            args.policy,
            namespace=args.namespace,
            kubeconfig=args.kubeconfig,
            context=args.context,
            timeout_ms=timeout_ms,
            bootstrap_servers=_own_bootstrap_servers(args),
        )
        policy, origin = found.policy, found.broker_origin
    target = target_for(
        policy, bootstrap_servers=args.bootstrap_servers, kafka_config=args.kafka_config, broker_origin=origin
    )
    return policy, target


def _own_bootstrap_servers(args: argparse.Namespace) -> str | None:
    """The broker the user gives (``--bootstrap-servers``, else ``bootstrap.servers`` in
    ``--kafka-config``), which wins over the policy's."""
    if args.bootstrap_servers is not None and args.bootstrap_servers.strip():
        return str(args.bootstrap_servers.strip())
    if args.kafka_config:
        return read_kafka_config(args.kafka_config).get("bootstrap.servers") or None
    return None


def _timeout_ms(text: str) -> int:
    try:
        value = parse_duration_ms(text)
    except DurationError as error:
        raise BadInput(f"--request-timeout: {error}") from None
    if value <= 0:
        raise BadInput(f"--request-timeout: must be longer than 0, got {text!r}")
    return value


def run(args: argparse.Namespace, out: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Carry out a parsed command line; raises TriageError for every expected failure."""
    timeout_ms = _timeout_ms(args.request_timeout)
    window = Window()
    if args.command in ("stats", "ls"):
        window = parse_window(args.since, args.after, args.before, now_ms=round(time.time() * 1000))
    position = parse_position(args.position) if args.command == "show" else None
    if args.command == "redrive":
        window = parse_window(args.since, args.after, args.before, now_ms=round(time.time() * 1000))
        return _redrive(args, window, timeout_ms, out, warn)
    if args.command == "stats" and args.all_namespaces:
        return _stats_of_all(args, window, timeout_ms, out, warn)
    target = _target(args, timeout_ms)
    progress = Progress(sys.stderr, label=f"reading {target.topic}")
    with DeadLetterTopic(target, timeout_ms=timeout_ms) as topic:
        if args.command == "stats":
            try:
                stats = count(topic.read(window, progress=progress), window)
            finally:
                progress.close()
            if args.output == "table":
                out(stats_text(stats, topic=target.topic, window=window, expired=topic.expired))
            else:
                document = stats_document(stats, topic=target.topic, window=window, expired=topic.expired)
                out(dump(document, args.output))
        elif args.command == "ls":
            filters = Filters(window, frozenset(args.reason), frozenset(args.error_class), args.key)
            reasons: set[str] = set()
            classes: set[str] = set()

            def noting(letters: Iterable[DeadLetter]) -> Iterator[DeadLetter]:
                for letter in letters:
                    if letter.failed_at in window:
                        reasons.add(letter.reason or NONE)
                        classes.add(letter.error_class or NONE)
                    yield letter

            try:
                letters = select(noting(topic.read(window, progress=progress)), filters, args.limit)
            finally:
                progress.close()
            for wanted in sorted(filters.reasons - reasons):
                warn(
                    f"warning: --reason {wanted!r} matches no dead letter in the range (seen: {_listed(reasons)})"
                )
            for wanted in sorted(filters.error_classes):
                if not any(wanted in (cls, cls.rsplit(".", 1)[-1]) for cls in classes):
                    warn(
                        f"warning: --error-class {wanted!r} matches no dead letter in the range "
                        f"(seen: {_listed(classes)})"
                    )
            if args.output in ("json", "yaml"):
                items = [letter_document(letter, topic=target.topic, value=False) for letter in letters]
                out(
                    dump(
                        {"topic": target.topic, **expired_document(topic.expired), "items": items},
                        args.output,
                    )
                )
            elif letters:
                header, rows = ls_rows(letters, wide=args.output == "wide")
                width = None if args.output == "wide" else terminal_width(sys.stdout)
                out(table(header, rows, width=width))
            else:
                warn(f"No dead letters found in {target.topic}.")
            if topic.expired:
                warn(expired_line(topic.expired, target.topic))
        else:
            assert position is not None
            letter = topic.fetch(*position)
            if args.output == "text":
                out(show_text(letter, topic=target.topic))
            else:
                out(dump(letter_document(letter, topic=target.topic, value=True), args.output))
    return EXIT_OK


def policies_in_cluster(
    *, namespace: str | None, kubeconfig: str | None, context: str | None, timeout_ms: int
) -> list[tuple[str, str, DeadLetterPolicy | str]]:
    """``(namespace, name, policy or why it cannot be read)`` of every DeadLetterPolicy kubectl
    lists: in every namespace, or in ``namespace``."""
    if namespace is not None and not _NAME_RE.match(namespace):
        raise BadInput(f"--namespace: {namespace!r} is not a valid namespace name")
    command = [os.environ.get("KUBECTL") or "kubectl"]
    if kubeconfig:
        command.append(f"--kubeconfig={kubeconfig}")
    if context:
        command.append(f"--context={context}")
    command += [f"--request-timeout={max(timeout_ms // 1000, 1)}s", "get", "deadletterpolicies.sparkdlq.io"]
    command += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    stdout = run_kubectl(
        [*command, "-o", "json"],
        what="kubectl get deadletterpolicies",
        why="-A lists the policies with it",
        timeout_ms=timeout_ms,
    )
    found: list[tuple[str, str, DeadLetterPolicy | str]] = []
    for item in json.loads(stdout).get("items") or []:
        meta = item.get("metadata") or {}
        where = f"deadletterpolicy {meta.get('namespace')}/{meta.get('name')}"
        try:
            policy: DeadLetterPolicy | str = load_policy_text(json.dumps(item), source=where)
        except PolicyFileError as error:
            policy = str(error).replace("\n", "; ")
        found.append((str(meta.get("namespace", "")), str(meta.get("name", "")), policy))
    return sorted(found, key=lambda row: (row[0], row[1]))


def _stats_of_all(
    args: argparse.Namespace,
    window: Window,
    timeout_ms: int,
    out: Callable[[str], None],
    warn: Callable[[str], None],
) -> int:
    """``stats -A``: one row per policy; a policy that cannot be read is a warning and a row
    without counts, and the exit status says so (1) once every other policy was read."""
    if args.file is not None or args.policy is not None:
        raise BadInput("-A reads every policy of the cluster: give neither -f nor --policy")
    listed = policies_in_cluster(
        namespace=args.namespace, kubeconfig=args.kubeconfig, context=args.context, timeout_ms=timeout_ms
    )
    status = EXIT_OK
    rows: list[list[str]] = []
    documents: list[dict[str, Any]] = []
    for namespace, name, policy in listed:
        stats: Stats | None = None
        topic = ""
        try:
            if isinstance(policy, str):
                raise BadInput(policy)
            target = target_for(
                policy, bootstrap_servers=args.bootstrap_servers, kafka_config=args.kafka_config
            )
            topic = target.topic
            progress = Progress(sys.stderr, label=f"reading {namespace}/{name}'s {topic}")
            with DeadLetterTopic(target, timeout_ms=timeout_ms) as reader:
                try:
                    stats = count(reader.read(window, progress=progress), window)
                finally:
                    progress.close()
        except TriageError as error:
            warn(f"warning: {namespace}/{name}: {error}")
            status = max(status, EXIT_UNREACHABLE)
        if stats is None:
            rows.append([namespace, name, topic or NONE, "?", NONE, NONE])
            documents.append({"namespace": namespace, "policy": name, "topic": topic or None, "total": None})
            continue
        top = _ranked(stats.by_class)[0][0] if stats.total else NONE
        rows.append([namespace, name, topic, str(stats.total), format_time(stats.newest), top])
        documents.append(
            {"namespace": namespace, "policy": name, **stats_document(stats, topic=topic, window=window)}
        )
    if args.output == "table":
        if rows:
            header = ["NAMESPACE", "POLICY", "TOPIC", "DEAD LETTERS", "NEWEST", "TOP CLASS"]
            out(table(header, rows, width=terminal_width(sys.stdout)))
        else:
            warn(
                "No DeadLetterPolicy found" + (f" in namespace {args.namespace}." if args.namespace else ".")
            )
    else:
        out(dump({"items": documents}, args.output))
    return status


def redrive_document(
    args: argparse.Namespace, policy: DeadLetterPolicy, window: Window, now_ms: int
) -> DeadLetterRedrive:
    """The DeadLetterRedrive the command line describes (checked by the model)."""
    destination: dict[str, str] = {"type": args.to}
    if args.to.startswith("topic:"):
        destination = {"type": "topic", "topic": args.to.removeprefix("topic:")}
    elif args.to not in DESTINATION_TYPES:
        raise BadInput(f"--to: must be source, retry or topic:NAME, got {args.to!r}")
    selection: dict[str, Any] = {}
    if window.after is not None:
        selection["failedAfter"] = rfc3339(window.after)
    if window.before is not None:
        selection["failedBefore"] = rfc3339(window.before)
    for key, values in (("reasons", args.reason), ("errorClasses", args.error_class), ("keys", args.key)):
        if values:
            selection[key] = list(values)
    if args.filter:
        selection["filter"] = args.filter
    stamp = datetime.datetime.fromtimestamp(now_ms / 1000, tz=datetime.UTC).strftime("%Y%m%d%H%M%S")
    name = args.name or f"{policy.name}-redrive-{stamp}"
    document = {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": name, "namespace": policy.namespace},
        "spec": {
            "policyRef": {"name": policy.name},
            "selection": selection,
            "destination": destination,
            "ratePerSecond": args.rate,
            "maxRedrives": args.max_redrives,
        },
    }
    try:
        return parse_redrive(document)
    except PolicyError as error:
        raise BadInput("; ".join(str(issue) for issue in error.issues)) from None


def _redrive(
    args: argparse.Namespace,
    window: Window,
    timeout_ms: int,
    out: Callable[[str], None],
    warn: Callable[[str], None],
) -> int:
    policy, target = _located(args, timeout_ms)
    redrive = redrive_document(args, policy, window, round(time.time() * 1000))
    filters = Filters(window, frozenset(args.reason), frozenset(args.error_class), None)
    keys = {k.encode("utf-8") for k in args.key}
    matched = Stats()
    guarded = considered = 0
    samples: list[DeadLetter] = []
    with DeadLetterTopic(target, timeout_ms=timeout_ms) as topic:
        for letter in topic.read(Window()):
            considered += 1
            if not filters(letter) or (keys and letter.key not in keys):
                continue
            if (letter.redrive_count or 0) >= redrive.max_redrives:
                guarded += 1
                continue
            matched.add(letter)
            if len(samples) < 5:
                samples.append(letter.summary())
        expired = topic.expired
    to = redrive.destination.topic or f"{policy.retry_topic} (the policy's retry topic)"
    if args.output == "yaml" and not args.execute:
        out(yaml.safe_dump(_applied(redrive), sort_keys=False).rstrip())
        return EXIT_OK
    out(
        f"{'Redriving' if args.execute else 'Would redrive'} {matched.total} of {considered} dead letters of "
        f"{policy.qualified_name} to {to} ({guarded} skipped: redriven {redrive.max_redrives} times already)"
    )
    if expired:
        warn(expired_line(expired, target.topic))
    if matched.total:
        out("  by reason: " + ", ".join(f"{k}={v}" for k, v in _ranked(matched.by_reason)))
        out("  by error class: " + ", ".join(f"{k}={v}" for k, v in _ranked(matched.by_class)))
        header, rows = ls_rows(samples, wide=False)
        out(_indent(table(header, rows, width=terminal_width(sys.stdout))))
    if redrive.selection.filter:
        warn(
            f"note: --filter is evaluated by the redrive job; the counts above are before it: {redrive.selection.filter}"
        )
    if not args.execute:
        warn(
            "Nothing was written. Run again with --execute to create the DeadLetterRedrive "
            f"{redrive.name} (or -o yaml to see it)."
        )
        return EXIT_OK
    _create(args, redrive, timeout_ms, out)
    return EXIT_OK


def _applied(redrive: DeadLetterRedrive) -> dict[str, Any]:
    document = redrive_to_document(redrive)
    spec = document["spec"]
    for key, default in (("dryRun", False), ("suspend", False), ("failOnGaps", False)):
        if spec.get(key) == default:
            del spec[key]
    return document


def _create(
    args: argparse.Namespace, redrive: DeadLetterRedrive, timeout_ms: int, out: Callable[[str], None]
) -> None:
    """``kubectl create -f -`` of the redrive, with the connection flags the plugin was given."""
    command = [os.environ.get("KUBECTL") or "kubectl"]
    if args.kubeconfig:
        command.append(f"--kubeconfig={args.kubeconfig}")
    if args.context:
        command.append(f"--context={args.context}")
    command += [f"--request-timeout={max(timeout_ms // 1000, 1)}s", "create", "-f", "-"]
    stdout = run_kubectl(
        command,
        what=f"kubectl create deadletterredrive {redrive.name}",
        why="--execute creates the redrive with it",
        timeout_ms=timeout_ms,
        input=yaml.safe_dump(_applied(redrive), sort_keys=False),
    )
    out(stdout.strip())
    out(f"Follow it with: kubectl get dlr {redrive.name} -n {redrive.namespace} -w")


def _listed(values: set[str], most: int = 10) -> str:
    names = sorted(values)
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return (", ".join(names[:most]) or NONE) + more


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args, out=print, warn=lambda line: print(line, file=sys.stderr))
    except TriageError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # A pager or head closed the pipe: stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
