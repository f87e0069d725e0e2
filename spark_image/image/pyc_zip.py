"""Adds compiled bytecode beside every module of a zip that Python imports from.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of the driver's Python and
of every Python worker it starts, and Apache Spark ships it with sources only: each of those
processes compiles the pyspark modules it imports, every time (it cannot write the result back
into a zip). Python's zip importer reads a ``module.pyc`` stored beside ``module.py`` instead;
this rewrites the zip in place with one for every module, compiled by the interpreter that will
import them, checked against its source's hash (a changed source is compiled as before), and
naming the zip's path in tracebacks as an import from the zip does.

    python pyc_zip.py /opt/spark/python/lib/pyspark.zip     # at image build
"""

from __future__ import annotations

import _imp
import importlib.util
import os
import sys
import zipfile
from importlib._bootstrap_external import _code_to_hash_pyc  # type: ignore[attr-defined]


def add_bytecode(path: str) -> int:
    """Rewrite the zip at ``path`` with a checked-hash ``.pyc`` beside each ``.py``; returns how
    many modules were compiled."""
    partial = f"{path}.partial"
    compiled = 0
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        names = set(source.namelist())
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info, data)
            if not info.filename.endswith(".py") or f"{info.filename}c" in names:
                continue
            code = compile(data, f"{path}/{info.filename}", "exec", dont_inherit=True)
            source_hash = _imp.source_hash(importlib.util._RAW_MAGIC_NUMBER, data)  # type: ignore[attr-defined]
            pyc = _code_to_hash_pyc(code, source_hash, checked=True)
            target.writestr(zipfile.ZipInfo(f"{info.filename}c", info.date_time), bytes(pyc))
            compiled += 1
    os.chmod(partial, os.stat(path).st_mode)
    os.replace(partial, path)
    return compiled


if __name__ == "__main__":
    for zip_path in sys.argv[1:]:
        print(f"{zip_path}: {add_bytecode(zip_path)} modules compiled")
