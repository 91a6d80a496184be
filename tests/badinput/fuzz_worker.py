#!/usr/bin/env python3
"""Random byte mutations of valid traces, fed to the importers, projection and summary.

    python tests/badinput/fuzz_worker.py WORKDIR RESULTS.json --n N --seed S [--mem-mb M] [--files F,...]

Seeds: a small valid trace as Kineto JSON (X and B/E ranges, plain and gzipped) and as nsys
SQLite (plain and gzipped); with --files, those files instead (real traces of the corpus,
each unpacked if gzipped, then fed plain and gzipped alike). Each mutation flips bits, overwrites, deletes, duplicates or
truncates bytes, or splices in JSON tokens; gzipped seeds are mutated both before and after
compression. Every result must be a Trace (then projected and summarized) or a
WorkbenchError; anything else is recorded with its traceback and the input is kept in
WORKDIR/crashes/ as a reproducer. Runs in its own process so that even a hard crash of a C
extension is caught by the parent (the test), not lost.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracegen as tg  # noqa: E402

TOKENS = [b"null", b"true", b"-1", b"1e400", b"-1e308", b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\", b'"\\ud800"',
          b'"traceEvents"', b'"ph":"B"', b'"ph":"E"', b'"cat":"kernel"', b'"dur":-5', b"\x00", b"\xff\xfe",
          b"9" * 40, b'{"ph":"X","cat":"user_annotation","name":"z","pid":1,"tid":1,"ts":1,"dur":1}']


def seeds(work: Path) -> dict[str, bytes]:
    spec = tg.simple_spec(steps=1, layers=2, kernels_per_range=2)
    out = {
        "kineto.json": json.dumps(tg.kineto_doc(spec)).encode(),
        "kineto-be.json": json.dumps(tg.kineto_doc(spec, "BE")).encode(),
    }
    db = tg.write_nsys(spec, work / "seed.sqlite")
    out["nsys.sqlite"] = db.read_bytes()
    return out


def file_seeds(files: list[str]) -> dict[str, bytes]:
    """Each file's content by its name without ``.gz`` (which tells JSON from SQLite)."""
    out = {}
    for f in map(Path, files):
        data = f.read_bytes()
        out[f.name.removesuffix(".gz")] = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return out


def mutate(data: bytes, rng: random.Random, is_json: bool) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        if not b:
            break
        op = rng.randrange(10 if is_json else 6)
        i = rng.randrange(len(b))
        if op >= 7:  # JSON stays parseable: change a digit (times, ids, durations) or a letter
            digits = [j for j in range(i, min(len(b), i + 400)) if 0x30 <= b[j] <= 0x39]
            if digits and op != 9:
                b[rng.choice(digits)] = rng.choice(b"0123456789-")
            else:
                letters = [j for j in range(i, min(len(b), i + 400)) if 0x61 <= b[j] <= 0x7A]
                if letters:
                    b[rng.choice(letters)] = rng.choice(b"abcdefghijklmnopqrstuvwxyzXE")
        elif op == 0:  # flip bits
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # overwrite a run with random bytes
            n = rng.randint(1, 32)
            b[i:i + n] = bytes(rng.randrange(256) for _ in range(min(n, len(b) - i)))
        elif op == 2:  # delete a chunk
            del b[i:i + rng.randint(1, 256)]
        elif op == 3:  # duplicate a chunk
            n = rng.randint(1, 256)
            b[i:i] = b[i:i + n]
        elif op == 4:  # truncate
            del b[i:]
        elif op == 5:  # interesting bytes
            b[i] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))
        else:  # splice a JSON token
            b[i:i] = rng.choice(TOKENS)
    return bytes(b)


def run_one(path: Path) -> tuple[str, str | None]:
    """("imported", None) or ("rejected", None) for a Trace (projected and summarized) or a
    clean WorkbenchError; ("crash", traceback) for anything else."""
    from workbench.analysis import project, summary
    from workbench.errors import WorkbenchError
    from workbench.trace import import_file

    try:
        t = import_file(path)
        project(t)
        summary(t, by="path")
        summary(t, by="kernel")
        return "imported", None
    except WorkbenchError as e:
        msg = str(e)
        if not msg.startswith(str(path)):
            return "crash", f"error message does not start with the file: {msg[:300]!r}"
        return "rejected", None
    except BaseException:  # noqa: BLE001
        return "crash", traceback.format_exc()


def main(argv: list[str]) -> int:
    work, results = Path(argv[0]), Path(argv[1])
    n = int(argv[argv.index("--n") + 1])
    seed = int(argv[argv.index("--seed") + 1])
    if "--mem-mb" in argv:
        import resource

        mb = int(argv[argv.index("--mem-mb") + 1])
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    work.mkdir(parents=True, exist_ok=True)
    (work / "crashes").mkdir(exist_ok=True)
    rng = random.Random(seed)
    base = file_seeds(argv[argv.index("--files") + 1].split(",")) if "--files" in argv else seeds(work)
    kinds = [(k, gz) for k in base for gz in (False, True)]
    stats = {"mutations": 0, "imported": 0, "rejected": 0, "crashes": [], "by_seed": {}}
    t0 = time.perf_counter()
    from workbench.errors import WorkbenchError  # noqa: F401  (import cost outside the loop)
    import workbench.analysis  # noqa: F401
    import workbench.trace  # noqa: F401

    for i in range(n):
        name, gz = kinds[i % len(kinds)]
        data = base[name]
        is_json = name.endswith(".json")
        if gz:
            if rng.random() < 0.5:  # mutate the content, then compress: reaches the parser
                data = gzip.compress(mutate(data, rng, is_json), mtime=0)
            else:  # mutate the compressed stream: exercises the gzip error paths
                data = mutate(gzip.compress(data, mtime=0), rng, False)
        else:
            data = mutate(data, rng, is_json)
        path = work / f"m{seed}-{i}{'.json' if is_json else '.sqlite'}{'.gz' if gz else ''}"
        path.write_bytes(data)
        outcome, err = run_one(path)
        stats["mutations"] += 1
        key = name + (".gz" if gz else "")
        st = stats["by_seed"].setdefault(key, {"mutations": 0, "imported": 0})
        st["mutations"] += 1
        if err is None:
            stats[outcome] += 1
            st["imported"] += outcome == "imported"
            path.unlink()
        else:
            keep = work / "crashes" / path.name
            path.rename(keep)
            stats["crashes"].append({"file": str(keep), "error": err})
    stats["seconds"] = round(time.perf_counter() - t0, 1)
    results.write_text(json.dumps(stats, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
