"""What the export says of the capture: the tool and schema that wrote it, the command
captured, and the machine (GPUs, driver, OS). Only shown: a table that is absent or cannot
be read leaves its entries out."""

from __future__ import annotations

from ...manifest import ENV, SOURCE
from .database import KERNEL, Database

# The export's own description: META_DATA_EXPORT in newer exports (2024.5 on), EXPORT_META_DATA
# in older ones (2022.2), with the same names and values.
_EXPORT_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def meta(db: Database) -> dict:
    export = next((kv for kv in (_kv(db, t) for t in _EXPORT_TABLES) if kv), {})
    capture_rows = db.rows("META_DATA_CAPTURE", "name, value")
    argv = [str(v) for k, v in capture_rows if str(k) == "PROCESS_0:COMMAND"]
    argv += [str(v) for k, v in capture_rows if str(k).startswith("PROCESS_0:ARGUMENT_")]
    system = _kv(db, "TARGET_INFO_SYSTEM_ENV")
    gpus = sorted({str(r[0]) for r in db.rows("TARGET_INFO_GPU", "name")})
    cuda = system.get("CudaDriverVersion")
    env = {
        "gpu": ", ".join(gpus),
        "driver": system.get("NvDriverVersion", ""),
        "cuda_driver_version": int(cuda) if cuda and cuda.isdigit() else cuda,
        "os": system.get("OsDescription", ""),
    }
    out = {
        SOURCE: {"format": "nsys-sqlite", "tool": "Nsight Systems",
                 "tool_version": export.get("EXPORT_PRODUCT_VERSION", ""),
                 "schema_version": export.get("EXPORT_SCHEMA_VERSION", "")},
        ENV: {k: v for k, v in env.items() if v},
    }
    if argv:
        out[SOURCE]["command"] = argv
    if "globalPid" not in db.columns(KERNEL):
        out[SOURCE]["assumed_single_process"] = True
        out[SOURCE]["note"] = ("kernels carry no process (no globalPid): read as one process, each launch "
                                 "matched by its correlation id alone")
    return out


def _kv(db: Database, table: str) -> dict[str, str]:
    """A name/value table as a dict; the first row of a name holds its value."""
    out: dict[str, str] = {}
    for k, v in db.rows(table, "name, value"):
        out.setdefault(str(k), str(v))
    return out
