"""A local stand-in for the Kubeflow spark-operator, for development and tests only.

The real spark-operator cannot run here (no kubelet, no container runtime), so this runner
plays its part against a real kube-apiserver: it watches ``SparkApplication`` objects
(``sparkoperator.k8s.io/v1beta2``) and runs each one with ``spark-submit`` in local mode. It
knows nothing about spark-dlq: it maps what a pod would have onto local files.

- ``mainApplicationFile: local:///path`` is mapped through ``path_map`` (container prefix ->
  local folder), as an image would have provided it.
- ``volumes`` of type ``configMap`` and ``secret`` are materialised from the apiserver into a
  folder per application; every argument under a ``volumeMounts`` path of the driver is
  rewritten to that folder. Volumes and mounts are read from the driver's pod template
  (``driver.template``: the pod's volumes, the mounts of its container
  ``spark-kubernetes-driver``) and from the spec's own ``volumes``/``driver.volumeMounts``.
  Nothing else of the template applies (no ports, no environment: drivers share this machine).
- ``sparkConf`` becomes ``--conf``; ``driver.memory`` becomes ``--driver-memory``; executors
  run inside the driver (local mode), so executor settings are recorded, not applied.
- With ``service_account_tokens``, the driver gets what a kubelet gives a pod: a token of its
  ``driver.serviceAccount`` (the TokenRequest API; one hour), the API server's CA and the
  namespace in a folder it finds in ``SPARK_DLQ_SERVICEACCOUNT_DIR``, and the API server in
  ``KUBERNETES_SERVICE_HOST``/``_PORT``: it calls the API as that account, as a driver pod does.
  A service account that does not exist fails the submission, as the pod would not be admitted.

Status follows the spark-operator's documented state machine in
``status.applicationState.state``: SUBMITTED when spark-submit starts, RUNNING once the driver
is up, COMPLETED on exit 0; on a non-zero exit FAILING then PENDING_RERUN while the restart
policy allows another attempt, else FAILED (``errorMessage`` from the end of the driver's
log). ``restartPolicy`` is honoured (Never / OnFailure with ``onFailureRetries`` and
``onFailureRetryInterval`` / Always), with PENDING_RERUN between attempts. A change of
``spec`` (not of metadata) invalidates a running application: INVALIDATING, the driver is
stopped (SIGTERM, then SIGKILL), PENDING_RERUN, and it is submitted again, as the
spark-operator resubmits on spec changes. A deleted application's driver is stopped.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.spark import spark_submit, submit_env

log = logging.getLogger("local-spark-operator")

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
#: The container of a driver pod template that Spark fills in (Spark's own name for it).
TEMPLATE_DRIVER_CONTAINER = "spark-kubernetes-driver"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_hash(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Driver:
    """One SparkApplication's local driver process and what the runner knows of it."""

    namespace: str
    name: str
    spec: dict[str, Any]
    hash: str
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    attempts: int = 0
    failures: int = 0
    next_submit_at: float = 0.0
    state: str = ""
    invalidated: bool = False
    stopped: bool = False
    started_at: float = 0.0
    #: The labels of the last version of the object this runner acted on (a test waits on them
    #: to know that a metadata change was seen, and then that nothing followed).
    labels: dict[str, str] = field(default_factory=dict)
    extra_status: dict[str, Any] = field(default_factory=dict)


class LocalSparkOperator:
    """Watches SparkApplications and runs them with local spark-submit."""

    def __init__(
        self,
        *,
        kubeconfig: str,
        workdir: Path,
        namespaces: list[str] | None = None,
        path_map: Mapping[str, str] | None = None,
        master: str = "local[2]",
        python_path: list[str] | None = None,
        extra_jars: list[str] | None = None,
        stop_grace: float = 30.0,
        driver_env: Mapping[str, str] | None = None,
        service_account_tokens: bool = False,
    ) -> None:
        self.api_client = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        self.objects = client.CustomObjectsApi(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self.workdir = workdir
        self.namespaces = namespaces
        self.path_map = dict(path_map or {})
        self.master = master
        self.python_path = python_path or []
        self.stop_grace = stop_grace
        #: Environment given to every driver (e.g. ``SPARK_DLQ_METRICS_PORT``), under the
        #: application's own ``driver.env``.
        self.driver_env = dict(driver_env or {})
        self.service_account_tokens = service_account_tokens
        self.drivers: dict[tuple[str, str], Driver] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: The watch in progress: ``stop`` ends it at once instead of after its timeout.
        self._watch: watch.Watch | None = None
        #: Completed passes over every driver (every 0.5 s): tests that prove nothing happened
        #: wait on passes, not on time.
        self.ticks = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._threads = [
            threading.Thread(target=self._watch_loop, daemon=True, name="sparkapp-watch"),
            threading.Thread(target=self._tick_loop, daemon=True, name="sparkapp-tick"),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._watch
        if stream is not None:
            stream.stop()  # type: ignore[no-untyped-call] # unblocks the read it waits in
        with self._lock:
            for driver in self.drivers.values():
                self._terminate(driver)
        for thread in self._threads:
            thread.join(10)

    # -- watching ------------------------------------------------------------------------

    def _list_and_watch(self, stream: watch.Watch) -> Any:
        if self.namespaces and len(self.namespaces) == 1:
            return stream.stream(  # type: ignore[no-untyped-call]
                self.objects.list_namespaced_custom_object,
                GROUP,
                VERSION,
                self.namespaces[0],
                PLURAL,
                timeout_seconds=30,
            )
        return stream.stream(  # type: ignore[no-untyped-call]
            self.objects.list_cluster_custom_object, GROUP, VERSION, PLURAL, timeout_seconds=30
        )

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            stream = self._watch = watch.Watch()  # type: ignore[no-untyped-call]
            if self._stop.is_set():
                break
            try:
                for event in self._list_and_watch(stream):
                    if self._stop.is_set():
                        stream.stop()  # type: ignore[no-untyped-call]
                        break
                    self._on_event(event["type"], event["object"])
            except Exception as error:  # noqa: BLE001 - apiserver restarts, CRD not yet there
                log.debug("watch interrupted: %s", error)
                self._stop.wait(1)

    def _on_event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if self.namespaces and namespace not in self.namespaces:
            return
        key = (namespace, name)
        with self._lock:
            driver = self.drivers.get(key)
            if kind == "DELETED":
                if driver is not None:
                    self._terminate(driver)
                    del self.drivers[key]
                return
            spec = obj.get("spec", {})
            digest = spec_hash(spec)
            if driver is None:
                driver = Driver(namespace, name, spec, digest, self.workdir / namespace / name)
                self.drivers[key] = driver
                self._submit(driver)
            elif digest != driver.hash:
                log.info("%s/%s: spec changed, resubmitting", namespace, name)
                driver.spec, driver.hash = spec, digest
                driver.attempts = driver.failures = 0
                if driver.process is not None and driver.process.poll() is None:
                    driver.invalidated = True
                    self._set_state(driver, "INVALIDATING")
                    self._terminate(driver)
                self._set_state(driver, "PENDING_RERUN")
                driver.next_submit_at = time.monotonic()
                driver.stopped = False
            driver.labels = dict(meta.get("labels") or {})

    def _tick_loop(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                for driver in list(self.drivers.values()):
                    with contextlib.suppress(Exception):
                        self._tick(driver)
                self.ticks += 1

    def _tick(self, driver: Driver) -> None:
        process = driver.process
        if process is None:
            if driver.state == "PENDING_RERUN" and time.monotonic() >= driver.next_submit_at:
                self._submit(driver)
            return
        code = process.poll()
        if code is None:
            if driver.state == "SUBMITTED" and time.monotonic() - driver.started_at > 1.0:
                self._set_state(driver, "RUNNING")
            return
        driver.process = None
        if driver.invalidated:
            driver.invalidated = False
            return
        policy = driver.spec.get("restartPolicy", {}) or {}
        restart = policy.get("type", "Never")
        if code == 0:
            self._set_state(driver, "COMPLETED", terminated=True)
            if restart == "Always":
                self._rerun(driver, float(policy.get("onFailureRetryInterval", 5)))
            return
        driver.failures += 1
        message = f"driver exited with code {code}: {self._log_tail(driver)}"
        retries = int(policy.get("onFailureRetries", 0) or 0)
        if restart == "Always" or (restart == "OnFailure" and driver.failures <= retries):
            self._set_state(driver, "FAILING", error=message, terminated=True)
            self._rerun(driver, float(policy.get("onFailureRetryInterval", 5)))
        else:
            self._set_state(driver, "FAILED", error=message, terminated=True)

    def _rerun(self, driver: Driver, interval: float) -> None:
        self._set_state(driver, "PENDING_RERUN")
        driver.next_submit_at = time.monotonic() + interval

    # -- submitting ----------------------------------------------------------------------

    def _submit(self, driver: Driver) -> None:
        driver.attempts += 1
        try:
            argv, env = self._command(driver)
        except Exception as error:  # noqa: BLE001 - a bad spec is a submission failure
            self._set_state(driver, "SUBMISSION_FAILED", error=str(error))
            return
        driver.log_path = driver.workdir / f"driver-{driver.attempts}.log"
        with driver.log_path.open("wb") as out:
            driver.process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        driver.started_at = time.monotonic()
        driver.extra_status = {
            "submissionID": str(uuid.uuid4()),
            "sparkApplicationId": f"local-{driver.process.pid}",
            "driverInfo": {"podName": f"{driver.name}-driver"},
            "lastSubmissionAttemptTime": _now(),
            "submissionAttempts": driver.attempts,
            "executionAttempts": driver.attempts,
        }
        self._set_state(driver, "SUBMITTED")
        log.info(
            "%s/%s: submitted (attempt %d, pid %d)",
            driver.namespace,
            driver.name,
            driver.attempts,
            driver.process.pid,
        )

    def _command(self, driver: Driver) -> tuple[list[str], dict[str, str]]:
        spec = driver.spec
        mounts = self._materialise_volumes(driver)
        main = self._map_path(str(spec.get("mainApplicationFile", "")))
        args = [self._map_mounts(str(a), mounts) for a in spec.get("arguments", []) or []]
        conf = dict(spec.get("sparkConf", {}) or {})
        argv = [str(spark_submit()), "--master", self.master, "--name", driver.name]
        memory = (spec.get("driver") or {}).get("memory")
        if memory:
            argv += ["--driver-memory", str(memory)]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        env = submit_env()
        jars = env.pop("PYSPARK_SUBMIT_ARGS").split()[1]
        argv += ["--jars", jars, main, *args]
        env["PYTHONPATH"] = os.pathsep.join([*self.python_path, env.get("PYTHONPATH", "")])
        env.update(self.driver_env)
        if self.service_account_tokens:
            env.update(self._service_account(driver))
        for item in (spec.get("driver") or {}).get("env", []) or []:
            if "value" in item:
                env[item["name"]] = str(item["value"])
        return argv, env

    def _service_account(self, driver: Driver) -> dict[str, str]:
        """Mount the driver's service account as a kubelet would; the environment that finds it."""
        account = str((driver.spec.get("driver") or {}).get("serviceAccount") or "default")
        try:
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
            )
            status = self.core.create_namespaced_service_account_token(
                account, driver.namespace, request
            ).status
        except ApiException as failure:
            raise ValueError(
                f"service account {account!r} of the driver: {failure.status} {failure.reason}"
            ) from None
        assert status is not None, "a TokenRequest answered without a token"
        folder = driver.workdir / "serviceaccount"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "token").write_text(str(status.token))
        (folder / "namespace").write_text(driver.namespace)
        configuration = self.api_client.configuration
        shutil.copy(configuration.ssl_ca_cert, folder / "ca.crt")
        server = urlsplit(configuration.host)
        return {
            "SPARK_DLQ_SERVICEACCOUNT_DIR": str(folder),
            "KUBERNETES_SERVICE_HOST": str(server.hostname),
            "KUBERNETES_SERVICE_PORT": str(server.port or 443),
        }

    def _map_path(self, path: str) -> str:
        if path.startswith("local://"):
            path = path[len("local://") :]
        for prefix, local in sorted(self.path_map.items(), key=lambda kv: -len(kv[0])):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return str(Path(local) / path[len(prefix) :].lstrip("/"))
        return path

    @staticmethod
    def _map_mounts(argument: str, mounts: Mapping[str, Path]) -> str:
        for mount_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if argument == mount_path or argument.startswith(mount_path.rstrip("/") + "/"):
                return str(local / argument[len(mount_path) :].lstrip("/"))
        return argument

    def _materialise_volumes(self, driver: Driver) -> dict[str, Path]:
        """Write each mounted configMap/secret volume into a local folder; return
        mountPath -> folder."""
        spec = driver.spec
        pod = ((spec.get("driver") or {}).get("template") or {}).get("spec") or {}
        volumes = {v["name"]: v for v in [*(spec.get("volumes") or []), *(pod.get("volumes") or [])]}
        template_mounts = [
            mount
            for container in pod.get("containers") or []
            if container.get("name") == TEMPLATE_DRIVER_CONTAINER
            for mount in container.get("volumeMounts") or []
        ]
        mounts: dict[str, Path] = {}
        root = driver.workdir / "volumes"
        shutil.rmtree(root, ignore_errors=True)
        for mount in [*((spec.get("driver") or {}).get("volumeMounts") or []), *template_mounts]:
            volume = volumes.get(mount["name"])
            if volume is None:
                raise ValueError(f"volumeMount {mount['name']!r} names no volume")
            folder = root / mount["name"]
            folder.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                data = (
                    self.core.read_namespaced_config_map(volume["configMap"]["name"], driver.namespace).data
                    or {}
                )
                files = {k: v.encode() for k, v in data.items()}
            elif "secret" in volume:
                secret = self.core.read_namespaced_secret(volume["secret"]["secretName"], driver.namespace)
                files = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
            elif "persistentVolumeClaim" in volume:
                raise ValueError(
                    f"volume {mount['name']!r}: a persistentVolumeClaim does not run locally "
                    "(give the operator no --checkpoint-claim)"
                )
            else:
                raise ValueError(f"volume {mount['name']!r}: only configMap and secret volumes run locally")
            for key, content in files.items():
                (folder / key).write_bytes(content)
            mounts[mount["mountPath"]] = folder
        return mounts

    # -- stopping and status ------------------------------------------------------------

    def _terminate(self, driver: Driver) -> None:
        process = driver.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(self.stop_grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        driver.process = None

    def _log_tail(self, driver: Driver, lines: int = 5) -> str:
        if driver.log_path is None or not driver.log_path.exists():
            return ""
        text = driver.log_path.read_text(errors="replace").splitlines()
        interesting = [line for line in text if line.startswith("dlq-engine:")] or text
        return " | ".join(interesting[-lines:])[:2000]

    def _set_state(
        self, driver: Driver, state: str, *, error: str | None = None, terminated: bool = False
    ) -> None:
        driver.state = state
        status: dict[str, Any] = {"applicationState": {"state": state}, **driver.extra_status}
        if error is not None:
            status["applicationState"]["errorMessage"] = error
        if terminated:
            status["terminationTime"] = _now()
        try:
            self.objects.patch_namespaced_custom_object_status(
                GROUP, VERSION, driver.namespace, PLURAL, driver.name, {"status": status}
            )
        except ApiException as failure:
            if failure.status != 404:
                log.warning("%s/%s: status not written: %s", driver.namespace, driver.name, failure.reason)
        log.info("%s/%s: %s", driver.namespace, driver.name, state)
