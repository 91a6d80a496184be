"""Structure-aware fuzzing of trtexec engine artifacts (the real ResNet-18 fp16 engine of
tests/data/tensorrt): records dropped, values of the wrong type, names changed, lists
truncated, in the graph, the profile and the timing file. Every import either succeeds with
times that add up, or is refused with one WorkbenchError; nothing else escapes."""

from __future__ import annotations

import copy
import gzip
import json
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DATA
import workbench as wb
from workbench.errors import WorkbenchError

ENGINE = DATA / "tensorrt" / "resnet18-a100-fp16"
FILES = {"graph": "engine.graph.json", "profile": "engine.profile.json"}
# A fresh object each draw: a later mutation of a drawn list must not leak into the next example.
ODD = st.sampled_from([None, "", "x", -1, 0, 1.5, 1e308, float("nan"), [], {}, [1, 2], {"a": 1}, True]).map(copy.deepcopy)


def _original() -> dict:
    out = {k: json.loads((ENGINE / f).read_text()) for k, f in FILES.items()}
    with gzip.open(ENGINE / "engine.timing.json.gz", "rt") as fh:
        out["timing"] = json.load(fh)
    return out


ORIGINAL = _original()


@st.composite
def mutated(draw):
    docs = copy.deepcopy(ORIGINAL)
    for _ in range(draw(st.integers(1, 4))):
        which = draw(st.sampled_from(sorted(docs)))
        doc = docs[which]
        records = doc.get("Layers") if isinstance(doc, dict) else doc
        if not isinstance(records, list) or not records:
            continue
        i = draw(st.integers(0, len(records) - 1))
        how = draw(st.sampled_from(["drop", "truncate", "key", "value", "rename", "whole"]))
        if how == "drop":
            del records[i]
        elif how == "truncate":
            del records[i:]
        elif how == "whole":
            docs[which] = draw(ODD)
        elif isinstance(records[i], dict) and records[i]:
            key = draw(st.sampled_from(sorted(records[i])))
            if how == "key":
                del records[i][key]
            elif how == "value":
                records[i][key] = draw(ODD)
            else:
                records[i][key] = str(records[i][key]) + draw(st.sampled_from(["", " ", "+x", "\u00fc"]))
    return docs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=mutated())
def test_mutated_engine_artifacts_import_or_refuse_in_one_line(tmp_path, docs):
    folder = tmp_path / "engine"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for k, f in FILES.items():
        (folder / f).write_text(json.dumps(docs[k]))
    with gzip.open(folder / "engine.timing.json.gz", "wt") as fh:
        json.dump(docs["timing"], fh)
    try:
        t = wb.import_file(folder)
    except WorkbenchError as e:
        assert "\n" not in str(e)
        return
    # Imported: one work unit per profiled layer, inside its layer's range.
    k = t.kernels
    assert (k["end"] >= k["start"]).all() and (k["range_id"] >= 0).all()
