"""The Python worker daemon of the engine's executors: PySpark's own (``pyspark.daemon``),
without a cost it adds to every task (``spark.python.daemon.module``, set by ``session``).

Before each task PySpark's worker calls ``importlib.invalidate_caches()``, so that files added
with ``addPyFile`` are found. On Python 3.11 that makes every ``zipimporter`` on ``sys.path``
read its archive's directory again, and Spark puts ``pyspark.zip`` (1,220 files) and py4j's
zip on every worker's path: about 100 ms of CPU per task measured here, in every task of every
micro-batch. The archives do not change while a worker lives (a file added later has its own
path, so its own importer, which reads it when created), so here each is read once.
"""

from __future__ import annotations

import zipimport


def _keep_directory(self: zipimport.zipimporter) -> None:
    """The archive's directory was read when the importer was made; it has not changed."""


def main() -> None:
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign]
    from pyspark.daemon import manager  # reads sys.argv[1], the worker module, as it always does

    manager()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
