"""The kopf handlers: thin adapters from kopf's callbacks to the reconcile.

Each handler parses the object into the shared policy model, turns a validation error into
``kopf.PermanentError`` (after reporting it in the status), calls the reconcile, and turns the
reconcile's "not yet" into ``kopf.TemporaryError`` with a delay. Handlers are registered on a
registry given by the caller, with the values of one ``OperatorConfig``, so a test can run an
operator with its own settings next to another. Clients are built at start-up into ``memo``
and closed at clean-up; the resync task and the metrics server live and die with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import socket
from typing import Any

import kopf

from dlq_engine.model import PolicyError
from spark_dlq_operator import kubeapi, naming, policy_class, redrives
from spark_dlq_operator.classes import ClassCatalog, own_namespace
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.metrics import MetricsServer
from spark_dlq_operator.policies.cleanup import clean_up, needs_cleanup
from spark_dlq_operator.policies.reconcile import reconcile, repair_deleted_application
from spark_dlq_operator.policies.services import CleanupPending, Seen, Services, TopicsNotReady, owner_of
from spark_dlq_operator.policies.status_writer import report_refused
from spark_dlq_operator.policies.watcher import update_job_status
from spark_dlq_operator.resync import Resync
from spark_dlq_operator.topics import (
    AdminProvisioner,
    PulsarProvisioner,
    StrimziProvisioner,
)

POLICY = (naming.POLICY_GROUP, naming.POLICY_VERSION, naming.POLICY_PLURAL)
APPLICATION = (naming.SPARK_GROUP, naming.SPARK_VERSION_API, naming.SPARK_PLURAL)
REDRIVE = (naming.POLICY_GROUP, naming.POLICY_VERSION, naming.REDRIVE_PLURAL)
POLICY_CLASS = (naming.POLICY_GROUP, naming.POLICY_VERSION, policy_class.CLASS_PLURAL)

logger = logging.getLogger(__name__)


def _services(memo: kopf.Memo) -> Services:
    services = memo.get("services")
    if not isinstance(services, Services):
        raise kopf.TemporaryError("the operator is still starting", delay=1)
    return services


def _generation(body: kopf.Body) -> int:
    return int(body.get("metadata", {}).get("generation") or 0)


def _new(body: kopf.Body, reason: str) -> bool:
    """A creation no reconcile has seen yet (kopf may handle a creation again when its own
    annotation patch reaches it late; by then the status is written)."""
    return str(reason) == kopf.Reason.CREATE.value and not body.get("status")


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:
    """Register every handler of the operator on ``registry``."""

    @kopf.on.login(registry=registry, id="login")
    async def login(**_: Any) -> kopf.ConnectionInfo:
        configuration = await kubeapi.load_configuration(config.kubeconfig)
        if not configuration.host:
            raise kopf.LoginError("no Kubernetes API server configured")
        return kopf.ConnectionInfo(
            server=configuration.host,
            ca_path=configuration.ssl_ca_cert,
            insecure=not configuration.verify_ssl,
            certificate_path=configuration.cert_file,
            private_key_path=configuration.key_file,
            token=await kubeapi.bearer_token(configuration),
        )

    @kopf.on.startup(registry=registry, id="start")
    async def start(memo: kopf.Memo, **_: Any) -> None:
        api = kubeapi.KubeApi(await kubeapi.load_configuration(config.kubeconfig))
        classes = ClassCatalog(api, config)
        classes.set_operator_namespace(config.operator_namespace or own_namespace())
        services = Services(
            config=config,
            api=api,
            events=EventRecorder(api, instance=socket.gethostname()),
            # No operator-wide credentials: each call passes the policy's class's for its broker.
            admin=AdminProvisioner(timeout=config.kafka_timeout),
            strimzi=StrimziProvisioner(api),
            pulsar=PulsarProvisioner(timeout=config.kafka_timeout),
            class_catalog=classes,
        )
        try:
            await classes.refresh()  # says so when the built-in class governs
        except (kubeapi.ApiError, OSError) as error:  # governing lists them again before it starts
            logger.warning("could not list the DeadLetterPolicyClasses yet: %s", error)
        resync = Resync(services)
        await resync.index_topics()
        memo["metrics"] = MetricsServer(config.metrics_port) if config.metrics_port else None
        memo["resyncer"] = resync
        memo["resync"] = asyncio.create_task(resync.run_forever(), name="spark-dlq resync")
        memo["services"] = services

    @kopf.on.cleanup(registry=registry, id="stop")
    async def stop(memo: kopf.Memo, **_: Any) -> None:
        task = memo.get("resync")
        if isinstance(task, asyncio.Task):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        server = memo.get("metrics")
        if isinstance(server, MetricsServer):
            server.stop()
        services = memo.get("services")
        if isinstance(services, Services):
            await services.close()

    @kopf.on.resume(*POLICY, registry=registry, id="reconcile")
    @kopf.on.create(*POLICY, registry=registry, id="reconcile")
    @kopf.on.update(*POLICY, registry=registry, id="reconcile")
    async def policy_changed(body: kopf.Body, memo: kopf.Memo, retry: int, reason: str, **_: Any) -> None:
        services = _services(memo)
        owner = owner_of(body)
        try:
            governed = await services.classes.govern(dict(body))
        except PolicyError as error:
            await report_refused(
                services, owner, generation=_generation(body), error=error, trigger=str(reason)
            )
            raise kopf.PermanentError(f"invalid policy: {error}") from None
        try:
            await reconcile(
                services,
                governed.policy,
                owner=owner,
                generation=_generation(body),
                trigger=str(reason),
                seen=Seen(policy=body, created=_new(body, reason)),
                fit=governed.fit,
            )
        except TopicsNotReady as error:
            delay = error.delay * min(2**retry, 8) if error.backoff else error.delay
            raise kopf.TemporaryError(str(error), delay=delay) from None

    def cleanup_needed(spec: kopf.Spec, **_: Any) -> bool:
        return needs_cleanup(spec)

    @kopf.on.delete(*POLICY, registry=registry, id="delete-topics", when=cleanup_needed)
    async def policy_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        services = _services(memo)
        owner = owner_of(body)
        try:
            policy = (await services.classes.govern(dict(body))).policy
        except PolicyError as error:
            await services.events.warn(
                owner,
                "CleanupSkipped",
                f"the policy is invalid or refused by its class, so its topics are unknown and kept: {error}",
            )
            return
        since = body.get("metadata", {}).get("deletionTimestamp")
        deleting_since = (
            datetime.datetime.fromisoformat(since) if since else datetime.datetime.now(datetime.UTC)
        )
        services.end(owner.uid)
        try:
            async with services.lock(owner.uid):  # after a reconcile in flight, never beside it
                await clean_up(
                    services, policy, owner=owner, deleting_since=deleting_since, status=body.get("status")
                )
        except CleanupPending as error:
            raise kopf.TemporaryError(str(error), delay=error.delay) from None
        services.claims.release(f"{owner.namespace}/{owner.name}", uid=owner.uid)

    @kopf.on.event(*POLICY, registry=registry, id="topic-claims")
    async def policy_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        """A deleted policy's topics are free at once (the resync would free them later)."""
        if event["type"] != "DELETED":
            return
        metadata = event["object"].get("metadata") or {}
        _services(memo).end(str(metadata.get("uid")))
        _services(memo).claims.release(
            f"{metadata.get('namespace')}/{metadata.get('name')}", uid=metadata.get("uid")
        )

    @kopf.on.event(
        *APPLICATION,
        labels={naming.MANAGED_BY_LABEL: naming.MANAGED_BY},
        registry=registry,
        id="spark-application",
    )
    async def application_event(
        event: kopf.RawEvent, memo: kopf.Memo, logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any
    ) -> None:
        services = _services(memo)
        app = event["object"]
        try:
            if redrives.redrive_of(app) is not None:
                if event["type"] != "DELETED":
                    await redrives.application_changed(services, app)
            elif event["type"] == "DELETED":
                await repair_deleted_application(services, app)
            else:
                await update_job_status(services, app)
        except (kubeapi.ApiError, OSError) as error:  # the next event or the resync catches up
            logger.warning(
                "could not map SparkApplication %s onto its policy: %s",
                app.get("metadata", {}).get("name"),
                error,
            )

    @kopf.on.event(*POLICY_CLASS, registry=registry, id="policy-class")
    async def class_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        resync = memo.get("resyncer")
        if isinstance(resync, Resync):
            await resync.class_changed(str(event["type"]), dict(event["object"]))

    @kopf.on.resume(*REDRIVE, registry=registry, id="redrive")
    @kopf.on.create(*REDRIVE, registry=registry, id="redrive")
    @kopf.on.update(*REDRIVE, registry=registry, id="redrive", field="spec")
    async def redrive_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        again = await redrives.reconcile_redrive(_services(memo), dict(body))
        if again is not None:
            raise kopf.TemporaryError("the redrive is pending", delay=again)
