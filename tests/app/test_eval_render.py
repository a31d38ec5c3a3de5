"""`lero eval --render`'s GIF: its whole caption fits the frame (measured in the font it is
drawn in, and on the pixels), and the arena each env declares is drawn: an MPE task's start
area dashed, a VMAS world's walls solid."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lero.app.reports.eval_render import (
    FONT_PX,
    HEADER,
    LINE_GAP,
    MARGIN,
    PANEL,
    START_COLOR,
    WALL_COLOR,
    arena_of,
    caption_text,
    font,
    render_frames,
    view_box,
    wrap,
)
from lero.training import EpisodeTrace
from lero.training.envs import make_env
from lero.training.envs.batched_env import Arena

LONG_TITLE = ("run 20261205-111808-shaped-spread-with-a-long-name, candidate 1-2, seed 0: held-out episodes "
              "of a policy whose run id is longer than the frame is wide: " + "x" * 90)  # fmt: skip


def trajectories(arena: list[float] | None, episodes: int = 2, steps: int = 4) -> dict:
    """What an evaluate job records (`EpisodeTrace.to_json`): 3 agents walking right, 2 landmarks."""
    t = np.arange(steps + 1)[None, :, None, None]  # [1, T + 1, 1, 1]
    agents = np.zeros((episodes, steps + 1, 3, 2)) + t * np.array([0.1, 0.0])  # [K, T + 1, 3, 2]
    agents[..., 1] += np.array([-0.5, 0.0, 0.5])
    landmarks = np.tile(np.array([[0.3, 0.3], [-0.3, -0.3]]), (episodes, steps + 1, 1, 1))  # [K, T + 1, 2, 2]
    record = {"agent_pos": agents.tolist(), "landmark_pos": landmarks.tolist(),
              "return": (-np.arange(steps + 1.0) * np.ones((episodes, 1))).tolist(), "length": [steps] * episodes}  # fmt: skip
    return record | ({"arena": arena} if arena is not None else {})


def _pixels(frame: Image.Image) -> np.ndarray:
    return np.asarray(frame.convert("RGB")).astype(int)  # [H, W, 3]


def _dark(pixels: np.ndarray) -> np.ndarray:
    return pixels.sum(axis=-1) < 3 * 128  # [..]: text and outlines


@pytest.mark.parametrize("episodes", [1, 2])
def test_the_whole_caption_is_in_the_frame(episodes: int) -> None:
    record = trajectories([1.0, 1.0, 0.0], episodes)
    frame = render_frames(record, LONG_TITLE)[-1]
    width, height = frame.size
    face = font()
    text = caption_text(LONG_TITLE, arena_of(record))
    lines = wrap(text, width - 2 * MARGIN, face)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # every character, none dropped
    assert len(lines) > 1 and all(face.getlength(line) <= width - 2 * MARGIN for line in lines)
    top = HEADER + PANEL
    assert height >= top + len(lines) * (FONT_PX + LINE_GAP)
    caption = _dark(_pixels(frame)[top:])  # [rows below the panels, W]
    rows = np.flatnonzero(caption.any(axis=1))
    assert rows.size and rows.max() < caption.shape[0] - 2  # the last line ends above the frame's bottom
    columns = np.flatnonzero(caption.any(axis=0))
    assert columns.min() >= MARGIN - 1 and columns.max() <= width - MARGIN  # nothing runs off the right edge
    # the lines' own measured extent: each drawn line of text is as tall as the font says
    bands = np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1)
    assert len(bands) == len(lines)


def _edge(frame: Image.Image, arena: tuple[float, float, bool], record: dict) -> np.ndarray:
    """The pixels [P, 3] along the arena's left edge in the first panel, between its corners."""
    from lero.app.reports.eval_render import episode_arrays

    positions, _, _ = episode_arrays(record)
    box = view_box(positions, arena)
    (x0, y0), (_, y1) = box.pixels(np.array([[-arena[0], arena[1]], [-arena[0], -arena[1]]]), 0)
    column = round(x0)
    return _pixels(frame)[round(y0) + 2 : round(y1) - 2, column - 1 : column + 2].reshape(-1, 3)


def test_walls_are_drawn_solid_and_a_start_area_dashed() -> None:
    for walls, color in ((1.0, WALL_COLOR), (0.0, START_COLOR)):
        record = trajectories([1.0, 1.0, walls])
        arena = arena_of(record)
        assert arena == (1.0, 1.0, bool(walls))
        edge = _edge(render_frames(record, "t")[0], arena, record)
        hits = (edge == np.array(color)).all(axis=1).reshape(-1, 3).any(axis=1)  # [rows]: the colour on that row
        assert hits.mean() > (0.9 if walls else 0.35), (walls, hits.mean())  # solid: every row; dashed: about half
        if not walls:
            assert hits.mean() < 0.75
    bare = trajectories(None)
    assert arena_of(bare) is None
    drawing = _pixels(render_frames(bare, "t")[0])[HEADER : HEADER + PANEL]  # below the text: no anti-aliased grey
    for color in (WALL_COLOR, START_COLOR):
        assert not (drawing == np.array(color)).all(axis=-1).any()  # no arena declared: none drawn
    assert "no arena boundary declared" in caption_text("t", None)


def test_a_one_sided_wall_is_drawn_where_it_is() -> None:
    """A VMAS world bounded in y only (balance's floor and ceiling): two horizontal walls."""
    record = trajectories([0.0, 1.0, 1.0])
    arena = arena_of(record)
    assert arena == (None, 1.0, True)
    pixels = _pixels(render_frames(record, "t")[0])[:, :PANEL]
    positions = {k: np.asarray(v) for k, v in record.items() if k.endswith("_pos")}
    (_, top), (_, bottom) = view_box(positions, arena).pixels(np.array([[0.0, 1.0], [0.0, -1.0]]), 0)
    for row in (round(top), round(bottom)):
        walled = (pixels[row - 1 : row + 2] == np.array(WALL_COLOR)).all(axis=-1).any(axis=0)  # [W]
        assert walled[MARGIN:-MARGIN].mean() > 0.9  # across the whole panel


@pytest.mark.parametrize(("env", "kwargs", "arena"), [
    ("simple_spread", {}, Arena(1.0, 1.0, walls=False)),  # MPE: entities start in [-1, 1]^2, unbounded
    ("vmas:navigation", {}, Arena(1.0, 1.0, walls=False)),  # its world_spawning_x/y, unbounded
    ("vmas:navigation", {"enforce_bounds": True, "world_spawning_x": 1.5}, Arena(1.5, 1.0, walls=True)),
    ("vmas:balance", {}, Arena(None, 1.0, walls=True)),
])  # fmt: skip
def test_each_env_declares_its_arena_and_the_trace_records_it(env: str, kwargs: dict, arena: Arena) -> None:
    built = make_env(env, 2, **kwargs)
    assert built.arena == arena
    trace = EpisodeTrace(1)
    trace.arena = built.arena
    trace.add(built.world(), np.zeros(2), np.ones(2, dtype=bool))
    record = trace.to_json()
    assert arena_of(record) == (arena.x, arena.y, arena.walls)


def test_the_caption_names_the_run_as_legends_do(tmp_path) -> None:
    from lero.app.reports.held_out import EvalTarget, render_title
    from lero.graph.configuration import RunSpec
    from lero.graph.rundir import RunDir

    def target(**named: object) -> EvalTarget:
        spec = RunSpec(env="simple_spread", run_id="20261205-111808-abcd", **named)
        return EvalTarget(rundir=RunDir(tmp_path), spec=spec, name="1-2", code=None, policies={})

    assert render_title(target(name="shaped-spread"), 0) == "shaped-spread, 1-2, seed 0: held-out episodes"
    assert render_title(target(name="lr-low", tags=("ablation",)), 1).startswith("lr-low #ablation, 1-2, seed 1")
    assert render_title(target(), 0) == "run 20261205-111808-abcd, 1-2, seed 0: held-out episodes"  # no name: its id
