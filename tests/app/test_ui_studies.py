"""The web UI's study pages against hostile study folders (the real `lero study` path is the
browser test in test_ui.py): a symlinked study or study.md, an odd name or a plot outside
the study is refused, never followed."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.ui.app import create_app
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir

TOKEN = "test-token-123"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rundir = RunDir.create(RunSpec(run_id="r1", runs_dir="runs", approve="none", sandbox="process"))
    rundir.update_state(status="completed")
    study = tmp_path / "runs/r1/studies/s1"
    (study / "plots").mkdir(parents=True)
    (study / "study.md").write_text("# Study s1\n\n| arm | return |\n|---|---|\n| native | -20 |\n\n"
                                    "![curves.png](plots/curves.png)\n<script>alert(1)</script>\n")
    (study / "study.json").write_text('{"status": "completed", "config": {"algos": ["mappo"], "steps": 400}}')
    (study / "plots/curves.png").write_bytes(PNG)
    (tmp_path / "secret.md").write_text("secret text")
    (tmp_path / "runs/r1/studies/linked").symlink_to(study)  # a planted link to a folder
    hostile = tmp_path / "runs/r1/studies/s2"
    hostile.mkdir()
    (hostile / "study.md").symlink_to(tmp_path / "secret.md")
    return tmp_path


@pytest.fixture
def client(runs):
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=runs)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        test_client.get(f"/?token={TOKEN}")
        yield test_client
    app.state.workers.close()


def test_studies_list_and_page_show_a_study_and_refuse_planted_links(client):
    listing = client.get("/studies").text
    assert "/runs/r1/studies/s1" in listing and "/runs/r1/studies/linked" not in listing
    page = client.get("/runs/r1/studies/s1")
    assert page.status_code == 200 and "<table>" in page.text and "<script>alert" not in page.text
    assert '<img src="/runs/r1/studies/s1/plots/curves.png"' in page.text
    assert client.get("/runs/r1/studies/s1/plots/curves.png").content == PNG
    assert 'href="/runs/r1/studies/s1"' in client.get("/runs/r1").text
    refused = client.get("/runs/r1/studies/s2")
    assert refused.status_code == 404 and "secret text" not in refused.text
    for path in ("/runs/r1/studies/linked", "/runs/r1/studies/.hidden", "/runs/r1/studies/s1/plots/x.txt",
                 "/runs/r1/studies/nosuch", "/runs/r1/studies/s1/plots/none.png"):
        assert client.get(path).status_code == 404, path
