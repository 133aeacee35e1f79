"""Chunked decoding (bounded memory) gives exactly the whole-file answer."""

from __future__ import annotations

import pytest
from conftest import shared, tricky_names_trace

import nongemm_trace


@pytest.mark.parametrize("name", ["bert_base_train_bs8_s128__eager", "fasterrcnn_resnet50_fpn_bs2__eager"])
def test_chunks_equal_whole(name, monkeypatch):
    path = shared("h200", name + ".json.gz")
    whole = nongemm_trace.analyze(path).to_dict()
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))  # many chunks
    chunked = nongemm_trace.analyze(path).to_dict()
    assert chunked == whole


def test_split_inside_a_string_falls_back(tmp_path, monkeypatch):
    """A name containing '}, {' tempts the boundary scan; the chunk fails to decode and the
    array is decoded whole instead: same answer."""
    p = tricky_names_trace(tmp_path, 7)
    whole = nongemm_trace.analyze(p).to_dict()
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(4 << 10))
    assert nongemm_trace.analyze(p).to_dict() == whole
