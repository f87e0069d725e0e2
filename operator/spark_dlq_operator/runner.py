"""Running the operator: kopf's settings for production and the call that starts it.

kopf's defaults suit a demo, not a cluster: progress and diff-base go to annotations under our
own prefix (the CRD's structural schema would drop ``status.kopf``), the finalizer carries our
name, watch requests are bounded in time on both sides, the SparkApplication watch is filtered
by label on the server, and kopf posts only warnings as events (the operator posts its own for
every action). ``run`` is what ``dlq-operator run`` calls and what tests run in a thread with a
stop flag. kopf waits longer than its default for its own patches to come back on the watch,
so a busy operator does not handle a creation twice.
"""

from __future__ import annotations

import logging
import threading

import kopf

from spark_dlq_operator import handlers, naming
from spark_dlq_operator.config import OperatorConfig

ANNOTATION_PREFIX = "sparkdlq.io"
FINALIZER = "sparkdlq.io/finalizer"


def build_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = FINALIZER
    # After its own annotation patch kopf waits for that version to come back on the watch;
    # until then the earlier events of the object (the handler's status write) are not acted on.
    # When the wait times out (kopf's default, 5 s, is soon reached by a busy operator: the watch
    # lags behind), kopf handles the creation a second time. A version that never comes back
    # only happens after a watch is restarted with a fresh list; then a new event ends the wait.
    settings.persistence.consistency_timeout = config.consistency_timeout
    settings.watching.server_timeout = int(config.server_timeout)  # the API wants whole seconds
    settings.watching.client_timeout = config.client_timeout
    settings.watching.connect_timeout = 30
    settings.watching.label_selectors[naming.SPARK_GROUP, naming.SPARK_PLURAL] = (
        f"{naming.MANAGED_BY_LABEL}={naming.MANAGED_BY}"
    )
    settings.peering.lifetime = config.peering_lifetime
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = naming.MANAGED_BY
    return settings


def build_registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, config)
    return registry


async def run(
    config: OperatorConfig,
    *,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
) -> None:
    """Run the operator until ``stop_flag`` is set (or a signal arrives, in the main thread)."""
    await kopf.operator(
        registry=build_registry(config),
        settings=build_settings(config),
        standalone=config.peering is None,
        peering_name=config.peering,
        priority=config.priority,
        clusterwide=config.all_namespaces,
        namespaces=list(config.namespaces),
        liveness_endpoint=config.liveness,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        memo=kopf.Memo(),
    )
