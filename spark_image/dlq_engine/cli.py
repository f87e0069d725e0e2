"""``dlq-engine``: run a DeadLetterPolicy as a Spark Structured Streaming job.

    dlq-engine run -f policy.yaml [--master local[2]] [--checkpoint DIR] [--once] [--create-topics]

``-f`` takes the very YAML a user applies to Kubernetes. A bad file gets one line per problem,
naming the field and line, and exit status 2; so does a file whose configuration hash is not
the ``--config-hash`` given (the operator passes the hash of the file it wrote). Exit status: 0 clean stop, 1 the query failed,
2 bad policy or processor, 3 the ``stop`` strategy stopped the job, 4 the error window did,
5 another engine holds the checkpoint (``dlq_engine.exits``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence

from dlq_engine.exits import EXIT_BAD_INPUT, EXIT_CHECKPOINT_LOCKED, EXIT_FAILED
from dlq_engine.failures import Ending, Failure
from dlq_engine.model.config_hash import config_hash
from dlq_engine.model.documents import PolicyFileError, load_policy_file
from dlq_engine.model.policy import KAFKA_CLIENT_DIR, PULSAR_CLIENT_DIR, DeadLetterPolicy
from dlq_engine.release import version_line, with_extra

#: ``dlq_engine.job.checkpoint_lock.DEFAULT_LEASE_S`` (not imported here: that loads PySpark).
DEFAULT_LEASE_S = 30.0

#: Default of ``--metrics-linger``: about one Prometheus scrape interval.
METRICS_LINGER_S = 20.0

#: ``dlq_engine.job.heartbeat.DEFAULT_INTERVAL_S`` (the job package is imported when a run starts).
DEFAULT_HEARTBEAT_S = 10.0

#: ``dlq_engine.job.metrics.DEFAULT_PROBE_INTERVAL`` (not imported here: that loads prometheus_client).
DEFAULT_PROBE_INTERVAL_S = 30.0

#: ``dlq_engine.job.checkpoint_lock.DEFAULT_SETTLE_S``.
DEFAULT_SETTLE_S = 2.0

#: ``dlq_engine.job.preflight.TIMEOUT_MS`` in seconds (not imported here: that loads PySpark).
DEFAULT_BROKER_TIMEOUT_S = 15.0


def _env_str(name: str) -> str:
    import os

    return os.environ.get(name, "").strip()


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def _env_int(name: str) -> int | None:
    import os

    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlq-engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=version_line("dlq-engine"))
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a policy's routing job")
    run.add_argument("-f", "--file", required=True, help="the DeadLetterPolicy YAML")
    run.add_argument("--master", help="Spark master, e.g. local[2] (default: from spark-submit)")
    run.add_argument("--checkpoint", help="checkpoint folder (default: spec.spark.checkpointLocation)")
    run.add_argument("--once", action="store_true", help="process what is available, then exit")
    run.add_argument(
        "--create-topics",
        action="store_true",
        help="create the retry and dead-letter topics if missing, as the operator would from "
        "spec.topics (for a run without the operator; needs CREATE on the broker)",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        default=_env_int("SPARK_DLQ_METRICS_PORT"),
        help="serve Prometheus metrics on this port (default: $SPARK_DLQ_METRICS_PORT, else none)",
    )
    run.add_argument(
        "--metrics-linger",
        type=float,
        default=METRICS_LINGER_S,
        help="when the query failed, keep serving metrics this many seconds before exiting, so "
        "that a scrape sees the failure (default %(default)s)",
    )
    run.add_argument(
        "--metrics-probe-interval",
        type=_positive_seconds,
        # a string default goes through ``type`` as if given: a bad value is refused by name
        default=_env_str("SPARK_DLQ_METRICS_PROBE_INTERVAL") or str(DEFAULT_PROBE_INTERVAL_S),
        help="seconds between reads of the dead-letter topic's size for the metrics (default: "
        "$SPARK_DLQ_METRICS_PROBE_INTERVAL, else %(default)s)",
    )
    run.add_argument(
        "--broker-timeout",
        type=_positive_seconds,
        default=_env_str("SPARK_DLQ_BROKER_TIMEOUT") or str(DEFAULT_BROKER_TIMEOUT_S),
        help="seconds the checks before the query wait for the broker to answer before they "
        "name it unreachable (default: $SPARK_DLQ_BROKER_TIMEOUT, else %(default)s)",
    )
    run.add_argument(
        "--checkpoint-lease",
        type=_positive_seconds,
        default=_env_str("SPARK_DLQ_CHECKPOINT_LEASE") or str(DEFAULT_LEASE_S),
        help="seconds an engine's lease on its checkpoint lasts unrenewed: a second engine on the "
        "same checkpoint is refused (exit 5) until the first stops, or this long after it died "
        "(on Kubernetes: as soon as its pod is gone) (default: $SPARK_DLQ_CHECKPOINT_LEASE, else "
        "%(default)s)",
    )
    run.add_argument(
        "--checkpoint-settle",
        type=_positive_seconds,
        default=_env_str("SPARK_DLQ_CHECKPOINT_SETTLE") or str(DEFAULT_SETTLE_S),
        help="seconds the engine waits after writing its lease before it reads it back, to see "
        "whether another engine claimed the checkpoint at the same moment (default: "
        "$SPARK_DLQ_CHECKPOINT_SETTLE, else %(default)s)",
    )
    run.add_argument(
        "--heartbeat-lease",
        metavar="NAMESPACE/NAME",
        help="report the query's liveness every --heartbeat-interval seconds in this Lease's "
        "annotation sparkdlq.io/heartbeat, through the Kubernetes API (the operator passes its "
        "policy's Lease; default: no heartbeat)",
    )
    run.add_argument(
        "--heartbeat-interval",
        type=_positive_seconds,
        default=_env_str("SPARK_DLQ_HEARTBEAT_INTERVAL") or str(DEFAULT_HEARTBEAT_S),
        help="seconds between heartbeats (default: $SPARK_DLQ_HEARTBEAT_INTERVAL, else %(default)s)",
    )
    run.add_argument(
        "--kafka-client-dir",
        default=None,
        help="Kafka client properties, one file each (default: the mounted "
        f"broker.secretRef at {KAFKA_CLIENT_DIR}, if present)",
    )
    run.add_argument(
        "--pulsar-client-dir",
        default=None,
        help="the Pulsar client's token, certificates or OAuth2 credentials, one file each (default: "
        f"the mounted broker.secretRef at {PULSAR_CLIENT_DIR}, if present)",
    )
    run.add_argument(
        "--config-hash",
        metavar="HASH",
        help="refuse to run (exit 2) unless the policy file's configuration hash is this one (the "
        "operator passes the hash of the policy.yaml it wrote, so a file changed since is caught "
        "before anything starts; default: no check)",
    )
    redrive = commands.add_parser("redrive", help="send a policy's dead letters back (a batch job)")
    redrive.add_argument("-f", "--file", required=True, help="the DeadLetterRedrive YAML")
    redrive.add_argument("--policy", required=True, help="the DeadLetterPolicy YAML it names")
    redrive.add_argument("--master", help="Spark master, e.g. local[2] (default: from spark-submit)")
    redrive.add_argument("--checkpoint", help="folder of the redrive's progress (required unless dryRun)")
    redrive.add_argument("--kafka-client-dir", default=None, help="as for run")
    redrive.add_argument("--pulsar-client-dir", default=None, help="as for run")
    redrive.add_argument(
        "--status-file",
        help="write the final status here as JSON (in a pod: /dev/termination-log, which the operator reads)",
    )
    check = commands.add_parser("check", help="validate a policy file and print it normalised")
    check.add_argument("-f", "--file", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    args = _parser().parse_args(argv)
    if args.command in ("run", "redrive"):
        with_extra("engine", "dlq-engine", _load_engine)
    if args.command == "redrive":
        return _redrive(args)
    try:
        policy = load_policy_file(args.file)
    except PolicyFileError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "check":
        import yaml

        from dlq_engine.model.policy import to_document

        print(yaml.safe_dump(to_document(policy), sort_keys=False), end="")
        return 0
    tampered = _config_hash_mismatch(policy, args.file, args.config_hash)
    if tampered is not None:
        print(f"dlq-engine: {tampered}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _run(policy, args, started=started)


def _load_engine() -> None:
    """Import what ``run`` and ``redrive`` need (Spark, Arrow, ...): without the engine extra that
    is one line naming it, not a traceback."""
    import dlq_engine.job.redrive
    import dlq_engine.job.runner  # noqa: F401


def _config_hash_mismatch(policy: DeadLetterPolicy, path: str, expected: str | None) -> str | None:
    """Why the policy file is not the one the operator wrote (its configuration hash is not
    ``expected``), or None when it is, or when there is nothing to check against."""
    if not expected:
        return None
    found = config_hash(policy)
    if found == expected:
        return None
    return (
        f"{path}: the policy's configuration hash is {found}, not {expected} as given by "
        "--config-hash: the file was changed after the operator wrote it (its ConfigMap "
        "rewritten or replaced by someone else); refusing to run it"
    )


def _run(policy: object, args: argparse.Namespace, *, started: float) -> int:
    from dlq_engine.job import pulsar_topics, warm_up
    from dlq_engine.job.checkpoint_lock import CheckpointLock, CheckpointLocked
    from dlq_engine.job.delay import JVM_DELAY_STAGE
    from dlq_engine.job.driver_pod import this_driver
    from dlq_engine.job.heartbeat import Heartbeat, HeartbeatError
    from dlq_engine.job.lock_file import HadoopLockFile
    from dlq_engine.job.metrics import EngineMetrics
    from dlq_engine.job.pipeline import RunOptions, client_properties
    from dlq_engine.job.preflight import (
        PreflightError,
        check_table,
        check_topics,
        create_topics,
        engine_class,
    )
    from dlq_engine.job.processors import ProcessorLoadError, load_processor
    from dlq_engine.job.pulsar_connector import check_classpath
    from dlq_engine.job.runner import Run, install_sigterm
    from dlq_engine.job.session import build_session

    assert isinstance(policy, DeadLetterPolicy)
    location = args.checkpoint or policy.spark.checkpoint_location
    if not location:
        print(
            "dlq-engine: no checkpoint: give --checkpoint or spec.spark.checkpointLocation", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    try:
        load_processor(policy.processor.entrypoint)
    except ProcessorLoadError as error:
        print(f"dlq-engine: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.checkpoint_lease <= 0:
        print(
            f"dlq-engine: --checkpoint-lease must be positive, got {args.checkpoint_lease}", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    options = RunOptions(
        checkpoint=location,
        once=args.once,
        kafka_client_dir=args.kafka_client_dir or KAFKA_CLIENT_DIR,
        pulsar_client_dir=args.pulsar_client_dir or PULSAR_CLIENT_DIR,
    )
    runs: list[Run] = []  # the run, once there is one (the heartbeat and the lease look at it)
    heartbeat: Heartbeat | None = None
    if args.heartbeat_lease:
        try:
            heartbeat = Heartbeat(
                args.heartbeat_lease, lambda: runs[0].liveness(), interval=args.heartbeat_interval
            )
        except HeartbeatError as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if heartbeat.unavailable is not None:
            print(f"dlq-engine: running without a heartbeat: {heartbeat.unavailable}", file=sys.stderr)
    metrics = None
    if args.metrics_port:
        metrics = EngineMetrics(policy, probe_interval=args.metrics_probe_interval)
        metrics.serve(args.metrics_port)
    session_at = time.monotonic()
    spark = build_session(policy, master=args.master)
    checks_at = time.monotonic()
    warm_up.start(spark, policy)
    pods, pod = this_driver(dict(spark.sparkContext.getConf().getAll()))
    lock = CheckpointLock(
        HadoopLockFile(spark, location),
        lease_s=args.checkpoint_lease,
        settle_s=args.checkpoint_settle,
        pods=pods,
        pod=pod,
    )
    try:
        try:
            engine_class(spark, JVM_DELAY_STAGE)
            check_table(spark, policy)
            client = client_properties(options.kafka_client_dir)
            if policy.is_pulsar:
                check_classpath(spark)
                if args.create_topics:
                    for line in pulsar_topics.create_topics(policy, options.pulsar_client_dir):
                        print(f"dlq-engine: {line}", flush=True)  # seen before a kill, through a pipe
                pulsar_topics.check_topics(spark, policy, options.pulsar_client_dir)
            else:
                timeout_ms = round(args.broker_timeout * 1000)
                if args.create_topics:
                    for line in create_topics(spark, policy, client, timeout_ms=timeout_ms):
                        print(f"dlq-engine: {line}", flush=True)
                check_topics(spark, policy, client, timeout_ms=timeout_ms)
        except PreflightError as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return EXIT_FAILED
        # Only a run that can start touches the checkpoint: the lease is its first write.
        lease_at = time.monotonic()
        try:
            lock.acquire()
        except CheckpointLocked as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return EXIT_CHECKPOINT_LOCKED
        query_at = time.monotonic()
        lock.keep_renewed(lambda reason: runs[0].lose_lease(reason) if runs else None)
        run = Run(spark, policy, options, metrics)
        runs.append(run)
        if lock.lost is not None:
            lost = Failure(Ending.LEASE_LOST, lock.lost)
            print(lost.message, file=sys.stderr)
            return lost.exit_status
        install_sigterm(run)
        if metrics is not None:
            metrics.watch(spark, location, client_properties(options.kafka_client_dir))
        run.start()
        if heartbeat is not None:
            heartbeat.start()
        now = time.monotonic()
        print(
            f"dlq-engine: query started {now - started:.1f}s after the engine started: Spark session "
            f"{checks_at - session_at:.1f}s, checks {lease_at - checks_at:.1f}s, checkpoint lease "
            f"{query_at - lease_at:.1f}s ({lock.waited_s:.1f}s waiting for the previous holder), "
            f"query {now - query_at:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        status = run.wait()
        print(f"dlq-engine: {run.totals.summary()}", file=sys.stderr if status else sys.stdout)
        if metrics is not None and status == EXIT_FAILED and args.metrics_linger > 0:
            time.sleep(args.metrics_linger)
        return status
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        lock.release()
        if metrics is not None:
            metrics.close()
        spark.stop()


def _redrive(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dlq_engine.model.documents import load_redrive_file
    from dlq_engine.model.redrive import policy_problem

    try:
        redrive = load_redrive_file(args.file)
        policy = load_policy_file(args.policy)
    except PolicyFileError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    problem = policy_problem(redrive, policy)
    if problem is not None:  # before the Spark session: it takes seconds to start
        print(f"dlq-engine: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from dlq_engine.job import pulsar_topics
    from dlq_engine.job.pipeline import client_properties
    from dlq_engine.job.preflight import PreflightError, check_topics
    from dlq_engine.job.pulsar_connector import check_classpath
    from dlq_engine.job.redrive import (
        DeadLettersExpired,
        Progress,
        Redrive,
        RedriveError,
        RedriveInputError,
        install_sigterm,
    )
    from dlq_engine.job.redrive_topics import RedriveTopicError, destination_topic
    from dlq_engine.job.session import build_session

    destination = destination_topic(policy, redrive.destination.type, redrive.destination.topic)
    kafka_client_dir = args.kafka_client_dir or KAFKA_CLIENT_DIR
    pulsar_client_dir = args.pulsar_client_dir or PULSAR_CLIENT_DIR
    spark = build_session(policy, master=args.master)
    status: dict[str, object]
    try:
        try:
            job = Redrive(
                spark,
                policy,
                redrive,
                checkpoint=Path(args.checkpoint) if args.checkpoint else None,
                kafka_client_dir=kafka_client_dir,
                pulsar_client_dir=pulsar_client_dir,
            )
            if policy.is_pulsar:
                check_classpath(spark)
            if redrive.dry_run:
                found = job.dry_run()
                status = {"state": "Succeeded", "dryRun": True, **found}
                print(
                    f"dlq-engine: dry run of redrive {redrive.qualified_name}: {found['matched']} of "
                    f"{found['considered']} dead letters would be sent to {destination!r} "
                    f"({found['skippedMaxRedrives']} skipped: redriven {redrive.max_redrives} times already)"
                    + (f"; {found['expired']} expired while they were read" if found["expired"] else "")
                )
                for title, key in (("by reason", "byReason"), ("by error class", "byErrorClass")):
                    tally = found[key]
                    assert isinstance(tally, dict)
                    print(f"  {title}: " + ", ".join(f"{k or '-'}={v}" for k, v in sorted(tally.items())))
                for sample in found["samples"]:
                    assert isinstance(sample, dict)
                    print(
                        f"  {sample['partition']}/{sample['offset']} key={sample['key']} "
                        f"{sample['reason']} {sample['errorClass']}: {sample['message']}"
                    )
            else:
                if policy.is_pulsar:
                    pulsar_topics.check_topics(spark, policy, pulsar_client_dir)
                else:
                    check_topics(spark, policy, client_properties(kafka_client_dir))
                install_sigterm(job)
                progress = job.run()
                status = {"dryRun": False, **progress.summary()}
                c = progress.counts
                print(
                    f"dlq-engine: redrive {redrive.qualified_name} {progress.state.lower()}: "
                    f"matched={c.matched} redriven={c.redriven} to {destination!r} "
                    f"skipped={c.skipped_max_redrives} (maxRedrives) "
                    f"possible-duplicates={c.possible_duplicates} considered={c.considered} "
                    f"expired={c.expired}"
                )
        except RedriveInputError as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except DeadLettersExpired as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            failed: dict[str, object] = {"state": "Failed", "reason": error.reason, "message": str(error)}
            if not redrive.dry_run and args.checkpoint:
                stopped = Progress.load(Path(args.checkpoint) / "progress.json")
                failed = {**(stopped.summary() if stopped is not None else {}), **failed}
            _write_status(args.status_file, failed)
            return EXIT_FAILED
        except (RedriveError, RedriveTopicError, PreflightError) as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            _write_status(args.status_file, {"state": "Failed", "message": str(error)})
            return EXIT_FAILED
        _write_status(args.status_file, status)
        return 0
    finally:
        spark.stop()


def _write_status(path: str | None, status: dict[str, object]) -> None:
    """The final status as compact JSON (a pod's termination message holds 4 KiB at most)."""
    if not path:
        return
    import json
    import os

    if path.startswith("/dev/") and not os.path.exists(path):
        return  # a pod's termination log, and this is not a pod

    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(status, separators=(",", ":"), default=str)[:4096])
    except OSError as error:
        print(f"dlq-engine: could not write the status to {path}: {error}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
