"""The real Kubeflow spark-operator, run as two host processes against the test bed's apiserver.

``scripts/setup/spark_operator.sh`` builds the ``spark-operator`` binary from its Go module; this
module runs it as its chart runs it, minus the Deployments: ``spark-operator controller start``
(leader election off, the job namespaces chosen by a namespace label) and ``spark-operator
webhook start``. The webhook's configurations are the chart's own (``helm template`` of the
chart the module ships), with each ``clientConfig.service`` replaced by a ``url`` on 127.0.0.1,
since no Service routes to a host process, and the namespace selector replaced by the same
label. The webhook serves a certificate signed by the test bed's CA, handed to it the way
cert-manager would (a ``kubernetes.io/tls`` Secret with ``ca.crt``; ``--enable-cert-manager``),
so it neither makes its own nor rewrites the configurations' ``caBundle``.

The controller's submitter is the ``spark-submit`` of the PySpark package (``SPARK_HOME``), the
same Spark as the project's image; it reaches the apiserver through ``KUBERNETES_SERVICE_HOST``
and ``KUBERNETES_SERVICE_PORT`` and authenticates with the kubeconfig in ``KUBECONFIG``, as the
Kubernetes client inside Spark does. Both processes act as the test bed's admin: the chart's
RBAC is exercised where the chart is installed on a cluster, not here. With no node, the driver
pods spark-submit creates stay Pending: what this proves is admission, submission and the state
machine, not a running driver.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import yaml

from spark_dlq_devtools.certs import make_server_cert
from spark_dlq_devtools.jvm_archive import submit_options
from spark_dlq_devtools.kube import CRD_LOADER, ControlPlane, crd_established
from spark_dlq_devtools.paths import (
    helm_bin,
    spark_operator_bin,
    spark_operator_chart,
    spark_operator_crds,
    work_dir,
)
from spark_dlq_devtools.processes import Service, free_port

#: Namespaces carrying this label with one of these values are the spark-operator's job
#: namespaces (its chart's ``spark.jobNamespaces``): the controller watches both; the webhook is
#: called for SparkApplications in both, for pods only in ``WATCHED`` (in ``POD_WEBHOOK_OFF``
#: what reaches a pod is only what spark-submit puts there).
JOB_NAMESPACE_LABEL: Final = "sparkdlq.test/spark-operator"
WATCHED: Final = "watched"
POD_WEBHOOK_OFF: Final = "pod-webhook-off"
#: The pod-mutating webhook's name in the chart.
POD_WEBHOOK: Final = "mutate--v1-pod.sparkoperator.k8s.io"
#: spark-submit is a short-lived JVM: C1 alone and the serial collector take it from about 50 s
#: to 10-20 s of a busy two-core machine's time, with the same result. The drivers' class-data
#: sharing archive (``jvm_archive``) is added when there is one: spark-submit runs on the same
#: class path (Spark's jars), so it maps Spark's classes from it instead of loading them.
SUBMIT_JVM_OPTIONS: Final = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: How long after a submission a missing driver pod is taken for the informer's lag rather than
#: a lost driver (the controller's default is 10 s). spark-submit has created the pod when it
#: returns, and the submission's time is taken before it runs: with no node to start a driver,
#: a longer grace only delays the restart a lost driver pod causes.
DRIVER_POD_GRACE: Final = "4s"
#: The longest the controller's work queue waits before it reconciles an application again after
#: an error (by default its delay doubles without bound from 5 ms, so a retry during the grace
#: above could come seconds after it ended).
RECONCILE_MAX_DELAY: Final = "1s"
#: Where the webhook's Secret lives, as the chart names it for a release called ``spark-operator``.
SYSTEM_NAMESPACE: Final = "spark-operator"
RELEASE: Final = "spark-operator"


class SparkOperator:
    """The spark-operator's controller and (unless ``webhook=False``) webhook, started by
    ``start()`` and stopped by ``stop()``, watching namespaces labelled ``JOB_NAMESPACE_LABEL``."""

    def __init__(self, kube: ControlPlane, *, name: str = "spark-operator", webhook: bool = True) -> None:
        self.kube = kube
        self.root = work_dir(name)
        self.webhook_enabled = webhook
        self.webhook_port = free_port()
        self.controller: Service | None = None
        self.webhook: Service | None = None
        self._webhook_configs: list[tuple[str, str]] = []

    @property
    def selector(self) -> str:
        return f"{JOB_NAMESPACE_LABEL} in ({WATCHED},{POD_WEBHOOK_OFF})"

    def _env(self) -> dict[str, str]:
        import pyspark

        env = dict(os.environ)
        env.update(
            KUBECONFIG=str(self.kube.admin_kubeconfig),
            SPARK_HOME=str(Path(pyspark.__file__).parent),
            KUBERNETES_SERVICE_HOST="127.0.0.1",
            KUBERNETES_SERVICE_PORT=str(self.kube.port),
            SPARK_SUBMIT_OPTS=f"{SUBMIT_JVM_OPTIONS} {submit_options()}".strip(),
        )
        return env

    def start(self, *, timeout: float = 120.0) -> None:
        self._install_crds(timeout)
        if self.webhook_enabled:
            self._start_webhook(timeout)
        probe = free_port()
        self.controller = Service(
            "spark-operator-controller",
            [
                str(spark_operator_bin()),
                "controller",
                "start",
                f"--namespace-selector={self.selector}",
                "--leader-election=false",
                "--controller-threads=4",
                "--enable-ui-service=true",
                "--enable-metrics=false",
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
                f"--driver-pod-creation-grace-period={DRIVER_POD_GRACE}",
                f"--workqueue-ratelimiter-max-delay={RECONCILE_MAX_DELAY}",
                "--zap-encoder=console",
                "--zap-log-level=info",
            ],
            log=self.root / "controller.log",
            env=self._env(),
            cwd=self.root,
        )
        self.controller.start()
        self.controller.wait_until(
            lambda: _ok(f"http://127.0.0.1:{probe}/readyz"), timeout=timeout, what="the controller's /readyz"
        )

    def _install_crds(self, timeout: float) -> None:
        """Its CRDs, as its chart installs them (created when absent, never changed)."""
        from kubernetes import client

        ext = client.ApiextensionsV1Api(self.kube_api())
        names = []
        for path in spark_operator_crds():
            crd = yaml.load(path.read_text(), Loader=CRD_LOADER)
            names.append(crd["metadata"]["name"])
            try:
                ext.create_custom_resource_definition(crd)
            except client.ApiException as error:
                if error.status != 409:
                    raise
        deadline = time.monotonic() + timeout
        for name in names:
            while not crd_established(ext, name):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} is not Established after {timeout:.0f}s")
                time.sleep(0.1)

    def _start_webhook(self, timeout: float) -> None:
        from kubernetes import client

        api = self.kube_api()
        core = client.CoreV1Api(api)
        pki = self.kube.pki
        cert, key = make_server_cert(pki, name="spark-operator-webhook", common_name="spark-operator-webhook")
        # The webhook parses a PKCS#1 key (as cert-manager writes RSA keys).
        pkcs1 = subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-traditional"], check=True, capture_output=True
        ).stdout
        data = {
            "ca.crt": (pki / "ca.crt").read_bytes(),
            "tls.crt": cert.read_bytes(),
            "tls.key": pkcs1,
        }
        _ensure_namespace(core, SYSTEM_NAMESPACE)
        secret_name = f"{RELEASE}-webhook-certs"
        secret = client.V1Secret(
            metadata=client.V1ObjectMeta(name=secret_name),
            type="kubernetes.io/tls",
            data={k: base64.b64encode(v).decode() for k, v in data.items()},
        )
        try:
            core.create_namespaced_secret(SYSTEM_NAMESPACE, secret)
        except client.ApiException as error:
            if error.status != 409:
                raise
            core.replace_namespaced_secret(secret_name, SYSTEM_NAMESPACE, secret)
        probe = free_port()
        self.webhook = Service(
            "spark-operator-webhook",
            [
                str(spark_operator_bin()),
                "webhook",
                "start",
                "--enable-cert-manager=true",
                f"--webhook-secret-name={RELEASE}-webhook-certs",
                f"--webhook-secret-namespace={SYSTEM_NAMESPACE}",
                f"--webhook-svc-name={RELEASE}-webhook-svc",
                f"--webhook-svc-namespace={SYSTEM_NAMESPACE}",
                f"--webhook-port={self.webhook_port}",
                f"--webhook-cert-dir={self.root / 'webhook-certs'}",
                f"--mutating-webhook-name={RELEASE}-webhook",
                f"--validating-webhook-name={RELEASE}-webhook",
                "--leader-election=false",
                "--enable-metrics=false",
                "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
                "--zap-encoder=console",
                "--zap-log-level=info",
            ],
            log=self.root / "webhook.log",
            env=self._env(),
            cwd=self.root,
        )
        self.webhook.start()
        self.webhook.wait_until(
            lambda: _ok(f"http://127.0.0.1:{probe}/readyz"), timeout=timeout, what="the webhook's /readyz"
        )
        self._register_webhooks(api, ca=data["ca.crt"])

    def webhook_configurations(self, *, ca: bytes) -> list[dict[str, Any]]:
        """The chart's Mutating- and ValidatingWebhookConfiguration, pointed at this webhook."""
        rendered = subprocess.run(
            [
                str(helm_bin()),
                "template",
                RELEASE,
                str(spark_operator_chart()),
                "--namespace",
                SYSTEM_NAMESPACE,
                "--show-only",
                "templates/webhook/mutatingwebhookconfiguration.yaml",
                "--show-only",
                "templates/webhook/validatingwebhookconfiguration.yaml",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        documents = [d for d in yaml.safe_load_all(rendered) if d]
        bundle = base64.b64encode(ca).decode()
        for document in documents:
            for hook in document["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{path}",
                    "caBundle": bundle,
                }
                values = [WATCHED] if hook["name"] == POD_WEBHOOK else [WATCHED, POD_WEBHOOK_OFF]
                hook["namespaceSelector"] = {
                    "matchExpressions": [{"key": JOB_NAMESPACE_LABEL, "operator": "In", "values": values}]
                }
        return documents

    def _register_webhooks(self, api: Any, *, ca: bytes) -> None:
        from kubernetes import client

        admission = client.AdmissionregistrationV1Api(api)
        create: Callable[[Any], object]
        delete: Callable[[str], object]
        for document in self.webhook_configurations(ca=ca):
            kind, name = document["kind"], document["metadata"]["name"]
            if kind == "MutatingWebhookConfiguration":
                create, delete = (
                    admission.create_mutating_webhook_configuration,
                    admission.delete_mutating_webhook_configuration,
                )
            else:
                create, delete = (
                    admission.create_validating_webhook_configuration,
                    admission.delete_validating_webhook_configuration,
                )
            try:
                delete(name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
            # The client takes a manifest (a dict) for a body; its stubs name only the model class.
            create(document)  # type: ignore[arg-type]
            self._webhook_configs.append((kind, name))

    def kube_api(self) -> Any:
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kube.admin_kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration)

    def stop(self) -> None:
        """Stop both processes and remove the webhook configurations, which would otherwise
        make the apiserver call a webhook that is gone."""
        if self._webhook_configs:
            from kubernetes import client

            admission = client.AdmissionregistrationV1Api(self.kube_api())
            for kind, name in self._webhook_configs:
                delete = (
                    admission.delete_mutating_webhook_configuration
                    if kind == "MutatingWebhookConfiguration"
                    else admission.delete_validating_webhook_configuration
                )
                try:
                    delete(name)
                except client.ApiException as error:
                    if error.status != 404:
                        raise
            self._webhook_configs.clear()
        for service in (self.controller, self.webhook):
            if service is not None:
                service.stop()


def _ensure_namespace(core: Any, name: str) -> None:
    from kubernetes import client

    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except client.ApiException as error:
        if error.status != 409:
            raise


def _ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)
