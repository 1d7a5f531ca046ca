"""The generated code in strom_api/v1 is committed; this checks it is what `make proto` makes
from the current .proto sources with the pinned grpcio-tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED_DIR = Path("strom_api") / "v1"


def _generated(base: Path) -> dict[str, bytes]:
    # Hand-written modules (e.g. __init__.py) are not protoc output.
    return {p.name: p.read_bytes() for p in sorted((base / GENERATED_DIR).glob("*_pb2*.py*"))}


def test_generated_code_is_current(tmp_path: Path) -> None:
    protos = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto/strom_api/v1").glob("*.proto"))
    assert protos, "no .proto sources under proto/strom_api/v1"
    # The same command as `make proto`, with the output sent to tmp_path instead of the tree.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iproto",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *protos,
        ],
        cwd=ROOT,
        check=True,
    )
    expected, committed = _generated(tmp_path), _generated(ROOT)
    missing = sorted(expected.keys() - committed.keys())
    extra = sorted(committed.keys() - expected.keys())
    stale = sorted(n for n in expected.keys() & committed.keys() if expected[n] != committed[n])
    assert not (missing or extra or stale), (
        f"strom_api/v1 is out of date with proto/ (missing {missing}, extra {extra}, "
        f"differing {stale}): run `make proto`"
    )


def test_error_codes_are_kafkas() -> None:
    from strom_api.v1 import common_pb2

    # A spot check that the enum carries Kafka's numbers (Errors.java), negative one included.
    assert common_pb2.ErrorCode.Value("UNKNOWN_SERVER_ERROR") == -1
    assert common_pb2.ErrorCode.Value("NONE") == 0
    assert common_pb2.ErrorCode.Value("NOT_LEADER_OR_FOLLOWER") == 6
    assert common_pb2.ErrorCode.Value("MESSAGE_TOO_LARGE") == 10
    assert common_pb2.ErrorCode.Value("UNSTABLE_OFFSET_COMMIT") == 88
    error = common_pb2.Error(code=common_pb2.CORRUPT_MESSAGE, message="crc", retriable=True)
    decoded = common_pb2.Error.FromString(error.SerializeToString())
    assert (decoded.code, decoded.message, decoded.retriable) == (2, "crc", True)
