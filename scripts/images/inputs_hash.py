"""Print a short hash of everything a Dockerfile builds from: used by scripts/setup/images.sh.

    python3 inputs_hash.py CONTEXT DOCKERFILE [WORD...]

The hash covers the Dockerfile, every file its COPY and ADD instructions take from the build
context (folders walked, ``__pycache__`` skipped) and the extra words (the build arguments and
the bases' image ids). An image labelled with this hash is what a build would make again, so
the set-up skips ``podman build`` for it; any change to these inputs changes the hash, and the
build then goes through podman's layer cache as usual.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
from pathlib import Path


def copied_sources(dockerfile: Path) -> list[str]:
    """The context paths of the Dockerfile's COPY and ADD instructions (not ``--from`` stages)."""
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


def files_of(context: Path, source: str) -> list[Path]:
    found: list[Path] = []
    for path in sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]:
        if not path.exists():
            raise SystemExit(f"{source}: named by a COPY but not found in {context}")
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
        else:
            found.append(path)
    return found


def main(argv: list[str]) -> int:
    context, dockerfile, *words = argv
    root = Path(context).resolve()
    digest = hashlib.sha256(Path(dockerfile).read_bytes())
    for source in copied_sources(Path(dockerfile)):
        for path in files_of(root, source):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update("\0".join(words).encode())
    print(digest.hexdigest()[:16])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
