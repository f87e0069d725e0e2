"""The image's class path jar: every jar of the folder, in name order, in a manifest a JVM reads."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

from spark_dlq_devtools.paths import REPO_ROOT


def class_path_jar() -> ModuleType:
    path = REPO_ROOT / "spark_image" / "image" / "class_path_jar.py"
    spec = importlib.util.spec_from_file_location("class_path_jar", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_jar_names_every_jar_in_name_order_relative_to_itself(tmp_path: Path) -> None:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    names = [f"{stem}-{'x' * 60}.jar" for stem in ("zstd", "avro", "spark-core")]
    for name in [*names, "NOTICE.txt"]:
        (jars / name).write_bytes(b"")
    written = tmp_path / "spark" / "spark-dlq-class-path.jar"
    assert class_path_jar().write(str(jars), str(written)) == 3

    manifest = zipfile.ZipFile(written).read("META-INF/MANIFEST.MF")
    lines = manifest.split(b"\n")
    assert max(len(line) for line in lines) <= 72  # the JAR specification's limit
    # A continuation line starts with one space, which the reader drops.
    unfolded = b"".join(line[1:] if line.startswith(b" ") else b"\n" + line for line in lines)
    [class_path] = [line for line in unfolded.split(b"\n") if line.startswith(b"Class-Path: ")]
    assert class_path.removeprefix(b"Class-Path: ").decode().split(" ") == [
        f"jars/{n}" for n in sorted(names)
    ]
    assert manifest.endswith(b"\n\n")
