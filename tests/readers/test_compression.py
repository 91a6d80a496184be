"""gzip through the library compression.py chose: the bytes of real gzipped captures as the
standard library reads them, every member of a stream, ``readinto`` going on where a read
stopped (each library installed), damage reported as the readers report it, and what it
writes read back by the standard library."""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import io

import pytest

from workbench.errors import TraceFormatError
from workbench.trace.readers import compression, nsys, source

from helpers import CORPUS, DATA
REAL = sorted([*(CORPUS).glob("*.gz"), *(DATA).glob("*.gz")])[:12]


def test_fastest_installed_library_reads():
    want = ("isal.igzip" if importlib.util.find_spec("isal") else
            "zlib_ng.gzip_ng" if importlib.util.find_spec("zlib_ng") else "gzip")
    assert compression.LIBRARY["read"] == want


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_captures_read_as_the_standard_library_reads_them(path):
    with source.open_bytes(path) as fh:
        assert isinstance(fh, gzip.GzipFile)  # what the Kineto reader asks of a gzip stream
        got = fh.read()
    assert got == gzip.decompress(path.read_bytes())


@pytest.mark.parametrize("lib", [m for m in ("isal.igzip", "zlib_ng.gzip_ng", "gzip")
                                 if importlib.util.find_spec(m.split(".")[0])])
def test_readinto_goes_on_where_read_stopped(tmp_path, lib):
    """``compression.readinto`` (what the Kineto reader fills its buffer with) gives the bytes
    after those ``read`` gave, across members, whichever library opened the stream."""
    data = bytes(range(256)) * 40_000
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress(data[:3_000_000], 1) + gzip.compress(data[3_000_000:], 1))
    with importlib.import_module(lib).open(path, "rb") as fh:
        got, buf = bytearray(fh.read(1000)), bytearray(1 << 20)
        while n := compression.readinto(fh, memoryview(buf)):
            got += buf[:n]
    assert got == data


def test_every_member_read(tmp_path):
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress(b"first member\n") + gzip.compress(b"second member\n"))
    with source.open_bytes(path) as fh:
        assert fh.read() == b"first member\nsecond member\n"


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_export_told_in_one_line(tmp_path, damage):
    data = bytearray((DATA / "nsys-graph-probe.sqlite.gz").read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        for i in range(len(data) // 2, len(data) // 2 + 64):
            data[i] ^= 0x5A
    path = tmp_path / "bad.sqlite.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip"):
        nsys.read(path)


def test_written_streams_read_back_alike():
    data = (DATA / "nsys-graph-probe.sqlite.gz").read_bytes() * 3
    packed = []
    for _ in range(2):
        buf = io.BytesIO()
        with compression.writer(buf, 6, "x.sqlite") as gz:
            gz.write(data)
        packed.append(buf.getvalue())
    assert packed[0] == packed[1]  # mtime 0: the same input, the same bytes
    assert gzip.decompress(packed[0]) == data
