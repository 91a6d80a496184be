"""A real Kineto trace made N times longer: HTA's trace-diff control trace (109k events of a
distributed training step, ``shared/external-traces/hta-trace-diff-control.json.gz``) repeated
``--times`` times one after another, each copy's timestamps shifted past the one before, its
correlation, External id and flow ids offset and its ``ProfilerStep#N`` renumbered, so the
copies are distinct steps; metadata events (``ph`` M) once. Written gzipped into a directory of
its own (HTA reads a directory of rank traces).

    python -m benchmarks.scale_kineto --times 10   # 1.09M events, benchmarks/data/hta-control-x10/
"""

from __future__ import annotations

import argparse
import copy
import gzip
import re
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "external-traces" / "hta-trace-diff-control.json.gz"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_IDS = ("External id", "correlation")


def scaled(doc: dict, times: int) -> dict:
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    ts = [e["ts"] for e in body if "ts" in e]
    span = max(e["ts"] + e.get("dur", 0) for e in body if "ts" in e) - min(ts) + 1000
    ids = [e["args"][k] for e in body for k in _IDS if isinstance(e.get("args", {}).get(k), int)]
    ids += [e["id"] for e in body if isinstance(e.get("id"), int)]
    id_step = max(ids) + 1
    steps = [int(m.group(1)) for e in body if (m := _STEP.match(str(e.get("name", ""))))]
    step_step = max(steps) + 1 if steps else 0
    out = list(meta)
    for k in range(times):
        for e in body:
            e = copy.deepcopy(e) if k else e
            if k:
                if "ts" in e:
                    e["ts"] += k * span
                if isinstance(e.get("id"), int):
                    e["id"] += k * id_step
                args = e.get("args")
                for key in _IDS:
                    if args and isinstance(args.get(key), int) and args[key] >= 0:
                        args[key] += k * id_step
                m = _STEP.match(str(e.get("name", "")))
                if m:
                    e["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_step}"
            out.append(e)
    return {**doc, "traceEvents": out}


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--times", type=int, default=10)
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    out_dir = a.out or HERE / "data" / f"hta-control-x{a.times}"
    path = out_dir / "trace.json.gz"
    if path.exists():
        return path
    doc = orjson.loads(gzip.decompress(a.source.read_bytes()))
    out_dir.mkdir(parents=True, exist_ok=True)
    data = orjson.dumps(scaled(doc, a.times))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(data, 6, mtime=0))
    tmp.rename(path)
    print(f"{path}: {len(data) / 1e6:.0f} MB of JSON, {path.stat().st_size / 1e6:.1f} MB gzipped")
    return path


if __name__ == "__main__":
    main()
