"""Shards: a stable partition of subscriber ids."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from subscribers.shards import Shard, shard_of


def test_every_id_is_in_exactly_one_shard_and_the_parts_are_even():
    ids = [secrets.token_hex(12) for _ in range(6000)]
    shards = [Shard(i, 3) for i in (1, 2, 3)]
    for sid in ids:
        assert sum(sid in shard for shard in shards) == 1
    sizes = [sum(sid in shard for sid in ids) for shard in shards]
    assert all(1700 < size < 2300 for size in sizes), sizes


@pytest.mark.subprocess
def test_the_partition_is_the_same_in_another_process():
    ids = [f"{n:024x}" for n in range(50)]
    here = [shard_of(sid, 4) for sid in ids]
    code = ("import sys; from subscribers.shards import shard_of; "
            "print(','.join(str(shard_of(f'{n:024x}', 4)) for n in range(50)))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert there == ",".join(map(str, here))


@pytest.mark.parametrize("text, expected", [("1/2", Shard(1, 2)), (" 3 / 3 ", Shard(3, 3)),
                                            ("1/1", Shard(1, 1))])
def test_parse(text, expected):
    assert Shard.parse(text) == expected
    assert str(expected) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "1", "1/2/3", ""])
def test_parse_refuses(text):
    with pytest.raises(ValueError):
        Shard.parse(text)
