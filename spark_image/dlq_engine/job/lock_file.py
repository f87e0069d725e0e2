"""The checkpoint lease's file: what it holds (``Holder``) and where it is kept (``LockFile``).

``<checkpoint>/dlq-engine.lock`` holds the lease's owner as JSON: a random token, the host, the
pid and, on Kubernetes, the pod (namespace, name, uid), when it was acquired, when it was last
renewed and the lease's length. ``HadoopLockFile`` keeps it through Hadoop's file system API, so
it lives wherever the checkpoint does (a local path, a shared volume, HDFS, an object store);
``checkpoint_lock`` decides who holds it.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass
from typing import Final, Protocol

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from dlq_engine.job.driver_pod import PodRef

LOCK_FILE: Final = "dlq-engine.lock"


@dataclass(frozen=True, slots=True)
class Holder:
    """The content of a lock file."""

    token: str
    host: str
    pid: int
    acquired: float
    renewed: float
    lease_s: float
    #: The holder's driver pod; None outside Kubernetes.
    pod: PodRef | None = None

    def expired(self, now: float) -> bool:
        return now > self.renewed + self.lease_s

    def describe(self, now: float) -> str:
        where = f"pod {self.pod}" if self.pod is not None else f"host {self.host}"
        return (
            f"engine pid {self.pid} on {where}, holding it since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.acquired))}, renewed "
            f"{max(0.0, now - self.renewed):.0f}s ago (lease {self.lease_s:.0f}s)"
        )

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "token": self.token,
                "host": self.host,
                "pid": self.pid,
                "acquired": self.acquired,
                "renewed": self.renewed,
                "leaseSeconds": self.lease_s,
                "pod": self.pod.document() if self.pod is not None else None,
            }
        ).encode()

    @staticmethod
    def parse(data: bytes) -> Holder | None:
        """None for a file that is not a lock (empty, half written, foreign)."""
        try:
            raw = json.loads(data.decode())
            return Holder(
                str(raw["token"]),
                str(raw["host"]),
                int(raw["pid"]),
                float(raw["acquired"]),
                float(raw["renewed"]),
                float(raw["leaseSeconds"]),
                PodRef.parse(raw.get("pod")),
            )
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            return None


class LockFile(Protocol):
    """The lock file's storage."""

    path: str

    def read(self) -> bytes | None:
        """The file's bytes; None when there is no file."""

    def create(self, data: bytes) -> bool:
        """Write a new file; False when one exists."""

    def replace(self, data: bytes) -> None:
        """Write the file, whether or not one exists."""

    def delete(self) -> None: ...


def _java_class(error: Py4JJavaError) -> str:
    return str(error.java_exception.getClass().getName())


class HadoopLockFile:
    """``<checkpoint>/dlq-engine.lock`` through Hadoop's file system API (the session's JVM)."""

    def __init__(self, spark: SparkSession, checkpoint: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self.path = posixpath.join(checkpoint.rstrip("/"), LOCK_FILE)
        self._jpath = jvm.org.apache.hadoop.fs.Path(self.path)
        self._fs = self._jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def read(self) -> bytes | None:
        for attempt in range(5):
            try:
                if not self._fs.exists(self._jpath):
                    return None
                stream = self._fs.open(self._jpath)
                try:
                    return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
                finally:
                    stream.close()
            except Py4JJavaError as error:
                if "FileNotFoundException" in _java_class(error):
                    return None
                if attempt == 4:
                    raise
                time.sleep(0.2)
        return None

    def _write(self, data: bytes, *, overwrite: bool) -> bool:
        self._fs.mkdirs(self._jpath.getParent())
        try:
            out = self._fs.create(self._jpath, overwrite)
        except Py4JJavaError as error:
            if not overwrite and "FileAlreadyExists" in _java_class(error):
                return False
            raise
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        return True

    def create(self, data: bytes) -> bool:
        return self._write(data, overwrite=False)

    def replace(self, data: bytes) -> None:
        self._write(data, overwrite=True)

    def delete(self) -> None:
        self._fs.delete(self._jpath, False)
