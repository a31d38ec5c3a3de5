"""The result cache answers only with what this installation sealed (sandbox.cache).

A forged, edited, moved or copied entry is a miss, said once; a FIFO, a link (to /dev/zero
above all) or an oversized file is a miss too, and none of them blocks or fills memory.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from lero.graph.trust import cache_signer
from lero.sandbox.cache import MAX_ENTRY_BYTES, CacheSigner, ResultCache, cache_key
from lero.sandbox.types import JobResult

KEY = cache_key(None, {"kind": "train_and_evaluate", "algo": "mappo"}, 3000)
OTHER = cache_key(None, {"kind": "train_and_evaluate", "algo": "mappo"}, 3001)
GENUINE = JobResult(status="ok", fitness=-12.0, metrics={"return": -12.0})


def told_cache(directory: Path, signer: CacheSigner | None = None) -> tuple[ResultCache, list[Path]]:
    told: list[Path] = []
    return ResultCache(directory, signer or cache_signer(), told.append), told


def get_promptly(cache: ResultCache, key: str) -> list[JobResult | None]:
    """CACHE.get(KEY) in a thread; the list stays empty if the read never returns (a FIFO)."""
    answer: list[JobResult | None] = []
    reader = threading.Thread(target=lambda: answer.append(cache.get(key)), daemon=True)
    reader.start()
    reader.join(60)  # a liveness guard, not a speed bound: the read ends at once or never
    return answer


def test_a_sealed_entry_is_a_hit_and_names_its_key(tmp_path) -> None:
    cache, told = told_cache(tmp_path)
    cache.put(KEY, GENUINE)
    hit = cache.get(KEY)
    assert hit is not None and hit.cached and hit.fitness == -12.0 and told == []
    entry = json.loads((tmp_path / f"{KEY}.json").read_text())
    assert set(entry) == {"key", "result", "seal"} and entry["key"] == KEY


@pytest.mark.parametrize("forge", ["plain", "edited", "moved", "other_installation"])
def test_an_entry_this_installation_did_not_seal_is_a_miss_said_once(tmp_path, forge: str) -> None:
    cache, told = told_cache(tmp_path)
    path = tmp_path / f"{KEY}.json"
    if forge == "plain":  # what lero wrote before entries were sealed, or a hand-made one
        path.write_text(json.dumps(JobResult(status="ok", fitness=-1000.0).to_dict()))
    elif forge == "edited":
        cache.put(KEY, GENUINE)
        entry = json.loads(path.read_text())
        entry["result"]["fitness"] = -1000.0
        path.write_text(json.dumps(entry))
    elif forge == "moved":  # a genuine entry of another job under this job's name
        cache.put(OTHER, GENUINE)
        (tmp_path / f"{OTHER}.json").rename(path)
    else:  # the same files sealed by another installation's run key (a copied run)
        ResultCache(tmp_path, CacheSigner(b"another installation's key")).put(KEY, GENUINE)
    assert cache.get(KEY) is None and cache.get(KEY) is None
    assert told == [path]  # one line per cache, however often it is asked


def test_two_installations_keys_seal_apart(tmp_path, monkeypatch) -> None:
    ResultCache(tmp_path, cache_signer()).put(KEY, GENUINE)
    assert ResultCache(tmp_path, cache_signer()).get(KEY) is not None  # the same installation, later
    monkeypatch.setenv("LERO_KEY_FILE", str(tmp_path / "elsewhere" / "run-key"))
    assert ResultCache(tmp_path, cache_signer()).get(KEY) is None


def test_a_fifo_entry_is_a_prompt_miss(tmp_path) -> None:
    cache, told = told_cache(tmp_path)
    os.mkfifo(tmp_path / f"{KEY}.json")
    assert get_promptly(cache, KEY) == [None]
    assert told == [tmp_path / f"{KEY}.json"]


@pytest.mark.parametrize("target", ["/dev/zero", "genuine"])
def test_a_linked_entry_is_a_miss(tmp_path, target: str) -> None:
    """A link to /dev/zero would read until memory runs out; a link to a sealed entry is
    refused too (an entry is a file of the cache, never what a link points at)."""
    cache, told = told_cache(tmp_path)
    if target == "genuine":
        cache.put(OTHER, GENUINE)
        target = str(tmp_path / f"{OTHER}.json")
    (tmp_path / f"{KEY}.json").symlink_to(target)
    assert get_promptly(cache, KEY) == [None]
    assert told == [tmp_path / f"{KEY}.json"]


def test_an_oversized_entry_is_a_miss(tmp_path) -> None:
    cache, told = told_cache(tmp_path)
    cache.put(KEY, GENUINE)
    path = tmp_path / f"{KEY}.json"
    with path.open("ab") as handle:  # a sealed entry padded past the cap (JSON allows the spaces)
        handle.write(b" " * (MAX_ENTRY_BYTES + 1 - path.stat().st_size))
    assert cache.get(KEY) is None and told == [path]
