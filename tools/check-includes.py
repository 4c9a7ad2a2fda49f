#!/usr/bin/env python3
"""Checks the include graph between kshard's top-level folders.

The layers (DESIGN.md, docs/architecture.md) run one way:

    base <- sharding <- protocol
    base, metrics <- http <- kube
    all of these <- operator, sidecar (which never include each other), tools

An include that points against them is a design bug: this script names every one and exits 1.
It also refuses what the build's include folders refuse (CMakeLists.txt), so that the two agree:
http/'s internal headers (http/internal/) outside http/, its tests and the fuzz harnesses, and
relative includes that climb out of a folder ("../").

Usage: tools/check-includes.py [repository root]   (default: the root this script is in)
"""
import pathlib
import re
import sys

# What each top-level folder may include besides itself. Test and harness folders may include
# any layer (they test it), but not another folder's internals (INTERNAL below).
ALLOWED = {
    "base": set(),
    "metrics": set(),
    "sharding": {"base"},
    "protocol": {"base", "sharding"},
    "http": {"base", "metrics"},
    "kube": {"base", "http"},
    "operator": {"base", "sharding", "protocol", "http", "metrics", "kube"},
    "sidecar": {"base", "sharding", "protocol", "http", "metrics", "kube"},
    "tools": {"base", "sharding", "protocol", "http", "metrics", "kube"},
    "examples": {"base", "http"},
    # Benchmarks share the tests' fixtures (tests/support/large_map.h).
    "bench": {"base", "sharding", "protocol", "http", "metrics", "kube", "operator", "sidecar",
              "tests"},
    "fuzz": {"base", "sharding", "protocol", "http", "metrics", "kube", "operator", "sidecar"},
    "tests": {"base", "sharding", "protocol", "http", "metrics", "kube", "operator", "sidecar",
              "tools", "examples", "fuzz"},
}
# Internal folders, and the places (path prefixes) that may include them.
INTERNAL = {
    "http/internal/": ("http/", "tests/http/", "fuzz/"),
}
SOURCE_SUFFIXES = {".h", ".cc", ".cpp", ".hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def violations(root: pathlib.Path):
    for folder in sorted(ALLOWED):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            if "/build/" in f"/{rel}" or "/corpus/" in rel:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = match.group(1)
                where = f"{rel}:{number}"
                if ".." in pathlib.PurePosixPath(target).parts:
                    yield f'{where}: relative include "{target}"; include from the root'
                    continue
                top = target.split("/", 1)[0]
                if "/" not in target or top not in ALLOWED:
                    continue  # a header of the same folder's own, or a third-party one
                if top != folder and top not in ALLOWED[folder]:
                    yield f'{where}: {folder}/ may not include {top}/ ("{target}")'
                for internal, allowed in INTERNAL.items():
                    if target.startswith(internal) and not rel.startswith(allowed):
                        yield f'{where}: "{target}" is internal to {internal.split("/")[0]}/'


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[1])
    found = list(violations(root.resolve()))
    for v in found:
        print(v)
    if found:
        print(f"check-includes: {len(found)} include(s) against the layers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
