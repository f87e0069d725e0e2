"""The ``kubectl dlq`` command line: its parser (the options go before or after the command's
name) and what each command does with a reader, the letters and the renderer.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NoReturn

from dlq_engine.model.dead_letter import DeadLetter
from dlq_engine.model.durations import DurationError, parse_duration_ms
from dlq_engine.model.reasons import DEAD_LETTER_REASONS
from spark_dlq_operator.kubectl_dlq.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_UNREACHABLE,
    PROG,
    BadInput,
    TriageError,
)
from spark_dlq_operator.kubectl_dlq.letters import Filters, Stats, count, select
from spark_dlq_operator.kubectl_dlq.policies import policies_in_cluster
from spark_dlq_operator.kubectl_dlq.progress import Progress
from spark_dlq_operator.kubectl_dlq.readers import open_reader
from spark_dlq_operator.kubectl_dlq.redrive import run_redrive
from spark_dlq_operator.kubectl_dlq.render import (
    dump,
    expired_document,
    expired_line,
    letter_document,
    ls_rows,
    ranked,
    show_text,
    stats_document,
    stats_text,
    table,
    terminal_width,
)
from spark_dlq_operator.kubectl_dlq.target import Target, located, target_for
from spark_dlq_operator.kubectl_dlq.times import NONE, Window, format_time, parse_window

#: ``PARTITION/OFFSET``; partition -1 is a non-partitioned Pulsar topic's, as the engine numbers it.
_POSITION_RE = re.compile(r"^(-1|\d+)/(\d+)$")


def parse_position(text: str) -> tuple[int, int]:
    """``PARTITION/OFFSET`` (``2/1534``; ``-1/...`` on a non-partitioned Pulsar topic), as ``ls``
    prints it."""
    match = _POSITION_RE.match(text.strip())
    if not match:
        raise BadInput(f"the position must be PARTITION/OFFSET such as 2/1534, got {text!r}")
    return int(match.group(1)), int(match.group(2))


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as kubectl does: one ``error:`` line, status 2; and
    ``-1/OFFSET`` (a position on a non-partitioned Pulsar topic) taken as an argument, as argparse
    takes a negative number, not as an option."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d+(/\d+)?$|^-\d*\.\d+$")

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
    "service_url": None,
    "pulsar_client": None,
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
    pulsar = parser.add_argument_group("Pulsar")
    pulsar.add_argument(
        "--service-url",
        metavar="pulsar://HOST:PORT",
        default=s,
        help="the broker to read from instead of the policy's spec.broker.serviceUrl",
    )
    pulsar.add_argument(
        "--pulsar-client",
        metavar="DIR",
        default=s,
        help="the policy's Pulsar client Secret as files, one per key (token, ca.crt, tls.crt, "
        "tls.key, oauth2.*), as the engine mounts it",
    )
    parser.add_argument("--request-timeout", metavar="DURATION", default=s,
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
    return located(args, timeout_ms)[1]


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
        return run_redrive(args, window, timeout_ms, out, warn)
    if args.command == "stats" and args.all_namespaces:
        return _stats_of_all(args, window, timeout_ms, out, warn)
    target = _target(args, timeout_ms)
    progress = Progress(sys.stderr, label=f"reading {target.topic}")
    with open_reader(target, timeout_ms=timeout_ms) as topic:
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
            # Each broker type's own options, so that one run reads Kafka and Pulsar policies.
            kafka = not policy.is_pulsar
            target = target_for(
                policy,
                bootstrap_servers=args.bootstrap_servers if kafka else None,
                kafka_config=args.kafka_config if kafka else None,
                service_url=None if kafka else args.service_url,
                pulsar_client=None if kafka else args.pulsar_client,
            )
            topic = target.topic
            progress = Progress(sys.stderr, label=f"reading {namespace}/{name}'s {topic}")
            with open_reader(target, timeout_ms=timeout_ms) as reader:
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
        top = ranked(stats.by_class)[0][0] if stats.total else NONE
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
