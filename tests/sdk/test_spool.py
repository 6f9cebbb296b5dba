"""The exporter's disk spool (toolscope_agent.spool; issue 27, item 5), on a real directory: files
kept in order, bounded, locked per process, found again by the next one."""

from __future__ import annotations

import gzip
import json
import os

from toolscope_agent.spool import Spool


def body(*ids: str) -> bytes:
    return gzip.compress(json.dumps({"events": [{"id": event} for event in ids]}).encode())


def test_batches_come_back_oldest_first_and_a_removed_one_is_gone(tmp_path):
    spool = Spool(tmp_path / "spool")
    for n in range(3):
        spool.add(body(f"e{n}a", f"e{n}b"), 2)
    assert spool.pending and spool.events == 6
    seen = []
    while (found := spool.oldest()) is not None:
        item, content = found
        seen.append(json.loads(gzip.decompress(content))["events"][0]["id"])
        spool.remove(item)
    assert seen == ["e0a", "e1a", "e2a"] and not spool.pending
    assert [p.name for p in (tmp_path / "spool").iterdir() if not p.name.startswith(".")] == []


def test_past_its_bound_the_oldest_are_dropped_and_counted(tmp_path):
    spool = Spool(tmp_path / "spool", max_bytes=4096)
    noise = os.urandom(1500)  # incompressible: each file about 1.5 KB
    for n in range(5):
        spool.add(noise + bytes([n]), 10)
    assert spool.size <= 4096 and spool.events == 20 and spool.dropped == 30
    _item, content = spool.oldest()  # type: ignore[misc]
    assert content[-1] == 3  # the two newest are kept (files 3 and 4), the older of them first
    assert spool.events + spool.dropped == 50


def test_a_second_process_takes_the_next_directory_and_a_restart_finds_what_was_left(tmp_path):
    first = Spool.in_free_directory(tmp_path / "spool")
    assert first is not None and first.directory == tmp_path / "spool"
    first.add(body("left"), 1)
    second = Spool.in_free_directory(tmp_path / "spool")  # another gateway on the same configuration
    assert second is not None and second.directory == tmp_path / "spool-2" and not second.pending
    first.close()  # the first process ends
    (tmp_path / "spool" / "junk.json.gz.tmp").write_bytes(b"half")  # a write it never finished
    restarted = Spool.in_free_directory(tmp_path / "spool")
    assert restarted is not None and restarted.directory == tmp_path / "spool"
    assert restarted.events == 1 and not (tmp_path / "spool" / "junk.json.gz.tmp").exists()
    _item, content = restarted.oldest()  # type: ignore[misc]
    assert json.loads(gzip.decompress(content)) == {"events": [{"id": "left"}]}
