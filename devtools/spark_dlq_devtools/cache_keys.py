"""The keys of the set-up's cached builds, computed here and only here.

A cached build (the engine's jar, a Java program, the node's images, argocd-health, the Python
environment, an image) lives in a folder or carries a label named by a short hash of what it is
built from, so that a change of its inputs builds it anew and nothing else does. The set-up
scripts ask this module for those hashes (``python3 -m spark_dlq_devtools.cache_keys KIND ...``,
through ``cache_key`` in ``scripts/setup/lib.sh``) and the test bed's ``paths`` module calls the
same functions to find what was built: one computation, so a script and a fixture can never
disagree on where a build is. Standard library only: the system Python runs it before any
virtualenv exists. A key written here is part of every machine's warm cache; changing how one is
computed rebuilds that part everywhere (for Kubernetes' or the images' inputs, an hour).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

#: The extras whose dependencies the project's virtualenv holds (besides the project's own).
VENV_EXTRAS = ("engine", "operator", "pulsar", "dev")


#: The Java programs ``java_programs.sh`` builds: name -> (their sources, the Maven properties
#: they are built with, in order: property -> the versions.env key that gives its value). The
#: script reads this table (``java-programs``), the test bed finds the builds by it.
JAVA_PROGRAMS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "interop": (
        "tests/interop/java",
        (
            ("kafka.version", "KAFKA_VERSION"),
            ("spring.kafka.version", "SPRING_KAFKA_VERSION"),
            ("pulsar.version", "PULSAR_CLIENT_VERSION"),
        ),
    ),
    "kafka-interop": ("tests/interop/kafka", (("kafka.version", "KAFKA_STREAMS_VERSION"),)),
    "pulsar-interop": (
        "tests/interop/pulsar",
        (("pulsar.version", "PULSAR_VERSION"), ("slf4j.version", "SLF4J_VERSION")),
    ),
    "spring": (
        "bench/peers/spring",
        (
            ("spring.kafka.version", "SPRING_KAFKA_VERSION"),
            ("kafka.version", "KAFKA_VERSION"),
            ("slf4j.version", "SLF4J_VERSION"),
        ),
    ),
    "connect": ("bench/peers/connect", (("kafka.version", "KAFKA_VERSION"),)),
}


def _manifest_key(root: Path, files: Iterable[Path], extra_lines: Sequence[str] = ()) -> str:
    """12 hex digits of the sha256 of ``sha256sum``'s lines for ``files`` (paths relative to
    ``root``, in byte order) followed by ``extra_lines``, one a line."""
    named = sorted((path.relative_to(root).as_posix(), path) for path in files)
    lines = "".join(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {name}\n" for name, path in named)
    lines += "".join(f"{line}\n" for line in extra_lines)
    return hashlib.sha256(lines.encode()).hexdigest()[:12]


def _java_sources(sources: Path) -> list[Path]:
    return [path for path in sources.glob("src/**/*.java") if path.is_file()]


def engine_jar_key(sources: Path) -> str:
    """The engine's JVM part (``spark_image/jvm``): its Java sources."""
    return _manifest_key(sources, _java_sources(sources))


def java_program_key(sources: Path, properties: Sequence[str]) -> str:
    """A Java program of ``java_programs.sh``: its ``pom.xml``, its Java sources and the Maven
    properties it is built with (``-Dname=value``, in the order they are passed)."""
    return _manifest_key(sources, [sources / "pom.xml", *_java_sources(sources)], properties)


def node_images_key(devtools: Path) -> str:
    """The node's own images (``devtools/node-images`` and the archive writer ``oci.py``)."""
    files = [p for p in (devtools / "node-images").rglob("*") if p.is_file()]
    return _manifest_key(devtools, [*files, devtools / "spark_dlq_devtools" / "oci.py"])


def files_key(files: Sequence[Path], extra: str = "") -> str:
    """12 hex digits of the sha256 of the files' contents, one after the other, then ``extra``."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    digest.update(extra.encode())
    return digest.hexdigest()[:12]


def argocd_health_key(source: Path) -> str:
    """``devtools/argocd-health``: its ``go.mod``, ``go.sum`` and Go files, in that order."""
    go_files = sorted(source.glob("*.go"), key=lambda p: p.name.encode())
    return files_key([source / "go.mod", source / "go.sum", *go_files])


def venv_requirements(pyproject: Path) -> list[str]:
    """What the project's virtualenv installs: the project's dependencies and those of
    ``VENV_EXTRAS``, following the extras' references to the project itself (``spark-dlq[...]``)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    requirements: list[str] = list(project["dependencies"])
    todo, seen = list(VENV_EXTRAS), set[str]()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        for requirement in extras[name]:
            own = re.fullmatch(r"spark-dlq\[([^\]]+)\]", requirement.strip())
            if own:
                todo += [n.strip() for n in own.group(1).split(",")]
            elif requirement not in requirements:
                requirements.append(requirement)
    return requirements


def venv_key(pyproject: Path) -> str:
    """The project's virtualenv: its requirements and the running Python's minor version (the
    Python that creates it)."""
    text = "\n".join(venv_requirements(pyproject)) + f"\n{sys.version_info[:2]}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _copied_sources(dockerfile: Path) -> list[str]:
    """The context paths of a Dockerfile's COPY and ADD instructions (not ``--from`` stages)."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    sources: list[str] = []
    for line in text.splitlines():
        words = shlex.split(line.strip(), comments=True)
        if len(words) < 3 or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(word.startswith("--from") for word in words[1:]):
            continue
        operands = [word for word in words[1:] if not word.startswith("--")]
        sources.extend(operands[:-1])
    return sources


def _context_files(context: Path, source: str) -> list[Path]:
    found: list[Path] = []
    for path in sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]:
        if not path.exists():
            raise SystemExit(f"{source}: named by a COPY but not found in {context}")
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
        else:
            found.append(path)
    return found


def image_key(context: Path, dockerfile: Path, words: Sequence[str]) -> str:
    """A project image (16 hex digits): its Dockerfile, every file its COPY and ADD instructions
    take from the build context (folders walked, ``__pycache__`` skipped) and the extra words
    (the build arguments and the bases' image ids). An image labelled with it is what a build
    would make again, so the set-up skips ``podman build`` for it."""
    root = context.resolve()
    digest = hashlib.sha256(dockerfile.read_bytes())
    for source in _copied_sources(dockerfile):
        for path in _context_files(root, source):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update("\0".join(words).encode())
    return digest.hexdigest()[:16]


USAGE = """\
usage: python3 -m spark_dlq_devtools.cache_keys KIND ARGS...
  engine-jar SOURCES                     the engine's jar (spark_image/jvm)
  java-programs                          JAVA_PROGRAMS: NAME SOURCES PROPERTY=VERSIONS-KEY...
  java-program SOURCES [-Dname=value...] a Java program of java_programs.sh
  node-images DEVTOOLS                   the node's images (devtools/)
  argocd-health SOURCES                  devtools/argocd-health
  venv PYPROJECT                         the project's virtualenv
  venv-requirements PYPROJECT            what it installs, one a line
  files [--extra WORDS] FILE...          files' contents (an image base's label)
  image CONTEXT DOCKERFILE [WORD...]     a project image's label"""


def main(argv: Sequence[str]) -> int:
    """Print the key of KIND (``USAGE``) on standard output."""
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    kind, *args = argv
    if kind == "engine-jar" and len(args) == 1:
        print(engine_jar_key(Path(args[0])))
    elif kind == "java-programs" and not args:
        for name, (sources, properties) in JAVA_PROGRAMS.items():
            print(" ".join([name, sources, *(f"{prop}={key}" for prop, key in properties)]))
    elif kind == "java-program" and args:
        print(java_program_key(Path(args[0]), args[1:]))
    elif kind == "node-images" and len(args) == 1:
        print(node_images_key(Path(args[0])))
    elif kind == "argocd-health" and len(args) == 1:
        print(argocd_health_key(Path(args[0])))
    elif kind == "venv" and len(args) == 1:
        print(venv_key(Path(args[0])))
    elif kind == "venv-requirements" and len(args) == 1:
        print("\n".join(venv_requirements(Path(args[0]))))
    elif kind == "files" and args:
        extra = ""
        if args[0] == "--extra" and len(args) >= 2:
            extra, args = args[1], args[2:]
        print(files_key([Path(a) for a in args], extra))
    elif kind == "image" and len(args) >= 2:
        print(image_key(Path(args[0]), Path(args[1]), args[2:]))
    else:
        print(f"cache_keys: unknown kind or wrong arguments: {' '.join(argv)}\n{USAGE}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
