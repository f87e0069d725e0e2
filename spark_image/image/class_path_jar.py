"""Writes a jar that holds nothing but a list of Spark's jars, in name order: the start of every
class path of the image's JVMs, so that they can map its class-data-sharing archive.

A JVM maps a class-data-sharing archive only when its class path starts as the one the archive
was made with (``jvm_training.py``), jar for jar. Named as a wildcard (``/opt/spark/jars/*``),
Spark's jars do not give that: the JVM expands a wildcard in the order the file system lists
the folder, which follows how a container runtime unpacked the image's layers onto that
node's file system, and Spark's launcher puts ``slf4j-api`` before the wildcard or after it
depending on whether a class path comes first (``spark.driver.extraClassPath``). So the archive
was made, and every driver and executor starts, with this jar first on the class path: its
manifest's ``Class-Path`` names every jar of the folder, relative to this jar, in name order,
and the JVM (and the archive) read them in that order, whatever the folder's listing.

    python class_path_jar.py /opt/spark/jars /opt/spark/spark-dlq-class-path.jar   # at image build
"""

from __future__ import annotations

import os
import sys
import zipfile

#: A manifest line's longest length in bytes (the JAR specification); longer values go on
#: continuation lines that start with a space.
LINE_BYTES = 72


def manifest(entries: list[str]) -> bytes:
    """A jar manifest whose ``Class-Path`` names ``entries`` (relative URLs), in that order."""
    lines = [b"Manifest-Version: 1.0", *_wrapped(b"Class-Path: " + " ".join(entries).encode())]
    return b"\n".join([*lines, b"Created-By: spark-dlq", b"", b""])


def _wrapped(line: bytes) -> list[bytes]:
    out = [line[:LINE_BYTES]]
    rest = line[LINE_BYTES:]
    while rest:
        out.append(b" " + rest[: LINE_BYTES - 1])
        rest = rest[LINE_BYTES - 1 :]
    return out


def class_path_entries(jars_dir: str, jar_path: str) -> list[str]:
    """Every jar of ``jars_dir`` in name order, as paths relative to ``jar_path``'s folder."""
    base = os.path.dirname(os.path.abspath(jar_path))
    names = sorted(name for name in os.listdir(jars_dir) if name.endswith(".jar"))
    if not names:
        raise SystemExit(f"no jars in {jars_dir}")
    return [os.path.relpath(os.path.join(os.path.abspath(jars_dir), name), base) for name in names]


def write(jars_dir: str, jar_path: str) -> int:
    """Write the jar; how many jars it names."""
    entries = class_path_entries(jars_dir, jar_path)
    with zipfile.ZipFile(jar_path, "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest(entries))
    return len(entries)


if __name__ == "__main__":
    count = write(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: a class path of {count} jars from {sys.argv[1]}")
