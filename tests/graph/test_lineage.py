"""The report's lineage of the elites, read off the `candidate` events."""

from lero.graph.lineage import lineage, lineage_markdown


def candidate(cid: str, kind: str, parents: list[str]) -> dict:
    return {"event": "candidate", "candidate_id": cid, "kind": kind, "parents": parents, "stage": "review"}


def test_each_elite_is_traced_back_through_its_first_parents():
    events = [candidate("0-0", "explore", []), candidate("0-1", "explore", []),
              candidate("1-0", "exploit", ["0-1"]), candidate("2-0", "exploit", ["1-0", "0-0"]),
              {"event": "job_started", "candidate_id": "2-0"}]
    fitness = {"0-0": -30.0, "0-1": -25.0, "1-0": -22.0, "2-0": -20.0, "2-1": None}
    rows = lineage(events, fitness, top=2)
    assert [row["candidate_id"] for row in rows] == ["2-0", "1-0"]
    assert [step["candidate_id"] for step in rows[0]["chain"]] == ["2-0", "1-0", "0-1"]
    assert rows[0]["kind"] == "exploit" and rows[0]["parents"] == ["1-0", "0-0"]
    lines = lineage_markdown(rows)
    assert "## Lineage of the elites" in lines
    assert "- `2-0` exploit (+ 0-0) <- `1-0` exploit <- `0-1` explore" in lines
    assert lineage_markdown([]) == []
