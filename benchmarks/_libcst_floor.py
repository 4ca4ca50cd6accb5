"""The LibCST floor distlint is compared against: parse every file (and optionally resolve the
Scope + QualifiedName metadata a ScopeProvider-based linter would compute).

    python benchmarks/_libcst_floor.py parse|metadata DIRECTORY
"""

import os
import sys

import libcst


def python_files(top):
    for directory, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def main():
    mode, top = sys.argv[1], sys.argv[2]
    if mode == "metadata":
        from libcst.metadata import MetadataWrapper, QualifiedNameProvider, ScopeProvider
    for path in python_files(top):
        with open(path, "rb") as handle:
            source = handle.read()
        try:
            module = libcst.parse_module(source)
        except Exception:
            continue
        if mode == "metadata":
            MetadataWrapper(module).resolve_many([ScopeProvider, QualifiedNameProvider])


if __name__ == "__main__":
    main()
