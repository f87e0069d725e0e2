"""The Python worker daemon of the engine's executors: PySpark's own (``pyspark.daemon``),
without a cost it adds to every task, and with a way to retire a worker that holds hung calls
(``spark.python.daemon.module``, set by ``session``).

When a task's files change ``sys.path`` PySpark's worker calls ``importlib.invalidate_caches()``,
so that files added with ``addPyFile`` are found (PySpark 4.0 did so before every task). On
Python 3.11 that makes every ``zipimporter`` on ``sys.path`` read its archive's directory again,
and Spark puts ``pyspark.zip`` (1,220 files) and py4j's zip on every worker's path: about 100 ms
of CPU per call measured here. The archives do not change while a worker lives (a file added
later has its own path, so its own importer, which reads it when created), so here each is read
once.

A processor call that overran ``processor.timeout`` is abandoned, not killed (Python cannot kill
a thread): one blocked in C code keeps its thread until it returns, perhaps never. Spark reuses
a worker for task after task, so such threads would pile up in it. At the end of each task
Spark sends ``END_OF_STREAM`` and the worker answers the same to be reused, or something else
to be let go (``pyspark.worker.main``). When an abandoned call is still running
(``time_limit.worker_must_retire``), the worker reads that last word as something else: it
answers so, Spark does not reuse it and closes its socket once the task is done, and the
worker's process ends, its threads with it. The task itself completes as usual.
"""

from __future__ import annotations

import struct
import zipimport
from typing import Any, BinaryIO

from dlq_engine.processing.time_limit import worker_must_retire

#: What Spark sends at the end of a task (``SpecialLengths.END_OF_STREAM``), and what the worker
#: is made to read instead when it must retire (any other number: PySpark then answers
#: ``END_OF_DATA_SECTION``, "do not reuse me", and exits).
_END_OF_STREAM = struct.pack("!i", -4)
_RETIRE = struct.pack("!i", 0)


def _keep_directory(self: zipimport.zipimporter) -> None:
    """The archive's directory was read when the importer was made; it has not changed."""


class _TaskInput:
    """A task's input stream, read as it is, except for the final ``END_OF_STREAM`` of a
    worker that must retire."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        if size == 4 and data == _END_OF_STREAM and worker_must_retire():
            return _RETIRE
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _retiring(main: Any) -> Any:
    """PySpark's worker ``main`` reading its task's input through ``_TaskInput``."""

    def run(infile: BinaryIO, outfile: BinaryIO) -> Any:
        return main(_TaskInput(infile), outfile)

    return run


def _in_forked_worker(worker: Any) -> Any:
    """``pyspark.daemon.worker``, which runs each task in a forked worker process, with the
    worker module's ``main`` (``pyspark.worker``, named by ``sys.argv[1]``) reading through
    ``_TaskInput``. PySpark imports that module only after the fork (pandas and pyarrow start
    threads when imported), so it is wrapped there, once per process."""

    def run(sock: Any, authenticated: bool) -> Any:
        import pyspark.worker

        if not getattr(pyspark.worker.main, "_retiring", False):
            pyspark.worker.main = _retiring(pyspark.worker.main)
            pyspark.worker.main._retiring = True  # type: ignore[attr-defined]
        return worker(sock, authenticated)

    return run


def main() -> None:
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign]
    import pyspark.daemon

    pyspark.daemon.worker = _in_forked_worker(pyspark.daemon.worker)
    pyspark.daemon.manager()  # type: ignore[no-untyped-call, unused-ignore]  # typed from PySpark 4.2


if __name__ == "__main__":
    main()
