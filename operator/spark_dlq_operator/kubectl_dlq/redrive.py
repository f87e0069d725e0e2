"""``kubectl dlq redrive``: count what a DeadLetterRedrive would send back, from the dead-letter
topic here, and with ``--execute`` create it with kubectl (the operator runs it).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import yaml

from dlq_engine.model.dead_letter import DeadLetter
from dlq_engine.model.policy import DeadLetterPolicy, PolicyError
from dlq_engine.model.redrive import (
    DESTINATION_TYPES,
    DeadLetterRedrive,
    parse_redrive,
    redrive_to_document,
    rfc3339,
)
from spark_dlq_operator.kubectl_dlq.errors import EXIT_OK, BadInput
from spark_dlq_operator.kubectl_dlq.letters import Filters, Stats
from spark_dlq_operator.kubectl_dlq.policies import run_kubectl
from spark_dlq_operator.kubectl_dlq.readers import open_reader
from spark_dlq_operator.kubectl_dlq.render import expired_line, indent, ls_rows, ranked, table, terminal_width
from spark_dlq_operator.kubectl_dlq.target import located
from spark_dlq_operator.kubectl_dlq.times import Window


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


def run_redrive(
    args: argparse.Namespace,
    window: Window,
    timeout_ms: int,
    out: Callable[[str], None],
    warn: Callable[[str], None],
) -> int:
    policy, target = located(args, timeout_ms)
    redrive = redrive_document(args, policy, window, round(time.time() * 1000))
    filters = Filters(window, frozenset(args.reason), frozenset(args.error_class), None)
    keys = {k.encode("utf-8") for k in args.key}
    matched = Stats()
    guarded = considered = 0
    samples: list[DeadLetter] = []
    with open_reader(target, timeout_ms=timeout_ms) as topic:
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
        out("  by reason: " + ", ".join(f"{k}={v}" for k, v in ranked(matched.by_reason)))
        out("  by error class: " + ", ".join(f"{k}={v}" for k, v in ranked(matched.by_class)))
        header, rows = ls_rows(samples, wide=False)
        out(indent(table(header, rows, width=terminal_width(sys.stdout))))
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
