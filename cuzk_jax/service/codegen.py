"""Generate ``proving_pb2.py`` / ``proving_pb2_grpc.py`` from ``proving.proto``, without the version guards.

``grpc_tools.protoc`` stamps its own versions into the stubs as import-time guards: ``proving_pb2_grpc.py`` raises
unless grpcio >= the grpcio-tools version that generated it, and ``proving_pb2.py`` calls
``runtime_version.ValidateProtobufRuntimeVersion`` (a module older protobuf lacks), which rejects any runtime older
than the generating protoc's. The code itself needs only old APIs (``channel.unary_unary(..., _registered_method=)``
and ``server.add_registered_method_handlers``, grpcio 1.64; ``AddSerializedFile`` and the ``builder`` functions,
protobuf 3.20), so the guards alone kept the daemon from starting on a machine with a fixed, older grpcio. This module
runs ``python -m grpc_tools.protoc -I. --python_out=OUT --grpc_python_out=OUT cuzk_jax/service/proving.proto``
from the directory holding the package, then removes the two guards, each replaced by a one-line comment. The
versions the stubs were checked against are pyproject.toml's minimums for grpcio and protobuf.

Removal is a plain text substitution, so the output is deterministic for a given grpc_tools; it raises if a guard
is not found exactly once, so a change in what grpc_tools emits is noticed rather than half-fixed. The
``# Protobuf Python Version:`` header is kept: it names the protoc that made the committed files.

``python -m cuzk_jax.service.codegen`` rewrites the committed stubs; ``tests/test_service.py`` regenerates them with
``generate`` and compares byte for byte.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROTO = "cuzk_jax/service/proving.proto"
STUBS = ("proving_pb2.py", "proving_pb2_grpc.py")

# (file, what, pattern, one-line replacement); each pattern must match exactly once.
_EDITS = (
    ("proving_pb2.py", "protobuf runtime_version import",
     re.compile(r"^from google\.protobuf import runtime_version as _runtime_version\n", re.M),
     "# runtime_version import removed by cuzk_jax.service.codegen: older protobuf lacks it "
     "(minimum: pyproject.toml)\n"),
    ("proving_pb2.py", "protobuf ValidateProtobufRuntimeVersion call",
     re.compile(r"^_runtime_version\.ValidateProtobufRuntimeVersion\(\n(?:    .*\n)+?\)\n", re.M),
     "# protobuf version check removed by cuzk_jax.service.codegen: it rejects the older runtimes "
     "pyproject.toml allows\n"),
    ("proving_pb2_grpc.py", "grpc GRPC_GENERATED_VERSION guard",
     re.compile(r"^GRPC_GENERATED_VERSION = .*?\nif _version_not_supported:\n    raise RuntimeError\(\n"
                r"(?:        [^\n]*\n)+?    \)\n", re.M | re.S),
     "# grpcio version guard removed by cuzk_jax.service.codegen: it rejects the older grpcio "
     "pyproject.toml allows\n"),
)


def postprocess(name: str, text: str) -> str:
    """``text`` of the generated stub ``name`` with its version guards replaced by comments.

    Raises ``ValueError`` when a guard is not found exactly once (grpc_tools changed what it emits)."""
    for file, what, pattern, comment in _EDITS:
        if file != name:
            continue
        text, n = pattern.subn(comment, text)
        if n != 1:
            raise ValueError(f"{name}: expected one {what}, found {n}; grpc_tools output changed, update "
                             f"cuzk_jax/service/codegen.py")
    return text


def generate(out_dir: str | Path) -> dict[str, Path]:
    """Run grpc_tools.protoc on proving.proto into ``out_dir`` and post-process the stubs in place.

    Returns the paths of the two stubs (under ``out_dir/cuzk_jax/service``). protoc runs from the directory holding
    the ``cuzk_jax`` package with ``-I.``, so the stubs name the proto and import each other as the committed ones."""
    out_dir = Path(out_dir)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--python_out={out_dir}",
                    f"--grpc_python_out={out_dir}", PROTO], cwd=PACKAGE_DIR.parents[1], check=True)
    paths = {}
    for name in STUBS:
        path = out_dir / "cuzk_jax" / "service" / name
        path.write_text(postprocess(name, path.read_text()))
        paths[name] = path
    return paths


def main() -> None:
    """Regenerate the committed stubs next to this module."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in generate(tmp).items():
            shutil.copyfile(path, PACKAGE_DIR / name)
            print(f"wrote {PACKAGE_DIR / name}")


if __name__ == "__main__":
    main()
