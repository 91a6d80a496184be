"""Reading a large uncompressed Kineto file in several processes.

This process reads the first range of the file while worker processes read the others (see
``kineto._Reader.batches``: a range holds exactly the pieces the one-pass reader makes there);
the workers' pieces are then appended in file order, so every table, row and name order
comes out as from one pass.

A worker is ``python -m workbench.trace.kineto_parallel``, not a multiprocessing child: those
re-run the caller's main script, which a notebook or a script without a ``__main__`` guard
does not expect. It writes a JSON line (the strings its name codes stand for, its counts,
the header, each piece's columns and B/E events) and then the columns' bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from .kineto import _NAMED, _gc_off, _Interner, _OnePass, _part, _Reader, _Tables


def read_parallel(path: Path, chunk: int, stops: list[int]) -> tuple[_Tables, dict]:
    """The tables and header of the whole file, this process reading up to ``stops[0]``; raises
    ``_OnePass`` when a worker fails for any reason (bad input included), as the one pass
    then meets the same problem again and reports the first one in file order."""
    import orjson

    if not sys.executable:
        raise _OnePass
    env = dict(os.environ)
    # The workers import this very copy of the package, wherever it was imported from.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
    workers = []
    try:
        for start, stop in zip(stops, [*stops[1:], None]):
            cmd = [sys.executable, "-m", __name__, os.fspath(path), str(chunk), str(start), str(stop or "")]
            try:
                workers.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, env=env))
            except OSError:
                raise _OnePass from None
        tables = _Tables(path)
        reader = _Reader(path, chunk)
        with _gc_off():
            for events, typed in reader.batches(stop=stops[0]):
                tables.add(events, typed)
            header = reader.header
            for w in workers:
                try:
                    out = orjson.loads(w.stdout.readline())
                    parts = [(_read_columns(w.stdout, rows), begin_end) for rows, begin_end in out["parts"]]
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    raise _OnePass from None
                if w.wait() != 0:
                    raise _OnePass
                tables.merge(parts, out["strings"], out["counts"])
                header = out["header"]  # the last range's has the keys after the events too
        return tables, header
    finally:
        for w in workers:
            w.kill()
            w.wait()
            w.stdout.close()


def _read_columns(stream, rows: dict) -> dict:
    """A piece's columns from their bytes, described by ``{table: {column: [dtype, n]}}``."""
    out = {}
    for table, cols in rows.items():
        out[table] = {}
        for col, (dtype, n) in cols.items():
            dtype = np.dtype(dtype)
            data = stream.read(n * dtype.itemsize)
            if len(data) != n * dtype.itemsize:
                raise ValueError("worker output ends early")
            out[table][col] = np.frombuffer(data, dtype)
    return out


def _work(path: str, chunk: int, start: int, stop: int | None, out) -> None:
    import orjson

    where = Path(path)
    reader = _Reader(where, chunk)
    names = {t: _Interner() for t in _NAMED}
    counts = {"events": 0, "gpu_user_annotation": 0}
    with _gc_off():
        parts = [_part(events, typed, names, counts, where) for events, typed in reader.batches(start, stop)]
    manifest = {
        "strings": {t: list(n) for t, n in names.items()}, "counts": counts, "header": reader.header,
        "parts": [({t: {c: [a.dtype.str, len(a)] for c, a in cols.items()} for t, cols in rows.items()}, begin_end)
                  for rows, begin_end in parts],
    }
    out.write(orjson.dumps(manifest) + b"\n")
    for rows, _ in parts:
        for cols in rows.values():
            for a in cols.values():
                out.write(np.ascontiguousarray(a).data)
    out.flush()


if __name__ == "__main__":
    _path, _chunk, _start, _stop = sys.argv[1:]
    _work(_path, int(_chunk), int(_start), int(_stop) if _stop else None, sys.stdout.buffer)
