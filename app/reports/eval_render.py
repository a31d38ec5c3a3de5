"""Episodes drawn as an animated GIF (`lero eval --render`): agents, landmarks, the agents'
trails, the arena's boundary (`training.envs.batched_env.Arena`: walls solid, a start area dashed),
the step and the return so far, one panel per episode side by side, and under them a
caption wrapped to the image's width and measured in its font, so none of it is cut off.

It draws what a trusted evaluate job recorded (`training.EpisodeTrace`, checked by
`sandbox.results` as nested finite numbers); shapes are checked again here, since a cached
result is a file. Pillow only: no display, no video encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from lero.graph.configuration import RunError

PANEL = 320  # pixels per episode panel (square)
MARGIN = 16
AGENT_R, LANDMARK_R = 7, 5  # pixels
FRAME_MS = 120
AGENT_FIELD = "agent_pos"  # the world field drawn as agents with trails; other `*_pos` fields as landmarks
AGENT_COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]  # fmt: skip
LANDMARK_COLOR, TEXT_COLOR, BACKGROUND = (90, 90, 90), (20, 20, 20), (255, 255, 255)
WALL_COLOR, START_COLOR = (60, 60, 60), (150, 150, 150)  # an arena's walls; a start area (dashed)
DASH = 6  # pixels on, then off, of a start area's dashed edge
FONT_PX = 13  # Pillow's own scalable font (no system font needed)
HEADER = 22  # pixels above a panel's drawing for its "episode k step t return r" line
LINE_GAP = 3  # pixels between caption lines


def episode_arrays(trajectories: dict[str, Any]) -> tuple[dict[str, np.ndarray], np.ndarray, list[int]]:
    """(positions {field: [K, T + 1, X, 2]}, returns [K, T + 1], lengths [K]); RunError when
    the record has no agents to draw or its shapes disagree."""
    try:
        returns = np.asarray(trajectories["return"], dtype=np.float64)  # [K, T + 1]
        lengths = [int(n) for n in trajectories["length"]]
        positions = {name: np.asarray(value, dtype=np.float64) for name, value in trajectories.items()
                     if name.endswith("_pos")}  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise RunError(f"the recorded episodes cannot be drawn: {error}") from None
    if AGENT_FIELD not in positions:
        raise RunError("this env's world has no agent_pos to draw (only MPE-style and VMAS envs render)")
    shape = returns.shape
    if returns.ndim != 2 or len(lengths) != shape[0] or any(
        p.ndim != 4 or p.shape[:2] != shape or p.shape[3] != 2 for p in positions.values()
    ):
        raise RunError("the recorded episodes cannot be drawn: their shapes disagree")
    return positions, returns, [max(0, min(n, shape[1] - 1)) for n in lengths]


@dataclass(frozen=True)
class Box:
    """The world square every panel shows: its low corner and side (world units)."""

    low: np.ndarray  # [2]
    span: float

    def pixels(self, points: np.ndarray, left: int) -> list[tuple[float, float]]:
        """World x/y [X, 2] -> pixel centres in the panel starting at LEFT (y up)."""
        scale = (PANEL - 2 * MARGIN) / self.span
        xs = left + MARGIN + (points[:, 0] - self.low[0]) * scale
        ys = HEADER + PANEL - MARGIN - (points[:, 1] - self.low[1]) * scale
        return list(zip(xs.tolist(), ys.tolist(), strict=True))


def arena_of(trajectories: dict[str, Any]) -> tuple[float | None, float | None, bool] | None:
    """(x, y, walls) of the recorded `arena` (`EpisodeTrace.to_json`: an unbounded axis 0),
    None when the record has none (an env that declares none, or a result recorded before)."""
    value = trajectories.get("arena")
    if not isinstance(value, list) or len(value) != 3 or not all(isinstance(v, int | float) for v in value):
        return None
    x, y, walls = (float(v) for v in value)
    if not (np.isfinite([x, y]).all() and x >= 0 and y >= 0) or x == y == 0:
        return None
    return (x or None, y or None, bool(walls))


def view_box(positions: dict[str, np.ndarray], arena: tuple[float | None, float | None, bool] | None) -> Box:
    """The square that holds every recorded position and the arena's bounded edges."""
    every = np.concatenate([p.reshape(-1, 2) for p in positions.values()])  # [*, 2]
    low, high = every.min(axis=0), every.max(axis=0)
    for axis, half in enumerate(arena[:2] if arena else ()):
        if half is not None:
            low[axis], high[axis] = min(low[axis], -half), max(high[axis], half)
    span = float(max(high - low)) or 1.0
    return Box(low - (span - (high - low)) / 2, span)  # centred on the shorter axis


def _dashed(draw: ImageDraw.ImageDraw, start: tuple[float, float], end: tuple[float, float]) -> None:
    (x0, y0), (x1, y1) = start, end
    steps = max(1, int(max(abs(x1 - x0), abs(y1 - y0)) // DASH))
    for k in range(0, steps, 2):
        a, b = k / steps, min(1.0, (k + 1) / steps)
        draw.line((x0 + (x1 - x0) * a, y0 + (y1 - y0) * a, x0 + (x1 - x0) * b, y0 + (y1 - y0) * b), fill=START_COLOR)


def draw_arena(draw: ImageDraw.ImageDraw, arena: tuple[float | None, float | None, bool], box: Box, left: int) -> None:
    """The arena's bounded edges in the panel at LEFT: walls solid and dark, a start area dashed."""
    x, y, walls = arena
    far = box.span * 4  # an unbounded axis: its edges run past the panel (clipped below)
    hx, hy = x if x is not None else far, y if y is not None else far
    corners = box.pixels(np.array([[-hx, hy], [hx, hy], [hx, -hy], [-hx, -hy]]), left)
    edges = [(corners[0], corners[1]), (corners[3], corners[2])] if y is not None else []  # top, bottom
    edges += [(corners[0], corners[3]), (corners[1], corners[2])] if x is not None else []  # left, right
    for start, end in edges:
        if walls:
            draw.line((*start, *end), fill=WALL_COLOR, width=2)
        else:
            _dashed(draw, start, end)


def _dot(draw: ImageDraw.ImageDraw, centre: tuple[float, float], radius: int, fill: tuple[int, ...]) -> None:
    x, y = centre
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=fill, outline=TEXT_COLOR)


def font() -> ImageFont.FreeTypeFont:
    """The captions' font: Pillow's own, at FONT_PX."""
    return ImageFont.load_default(size=FONT_PX)


def wrap(text: str, width: float, face: ImageFont.FreeTypeFont) -> list[str]:
    """TEXT in lines no wider than WIDTH pixels in FACE (a word longer than a line: cut at
    the width, the rest on the next line), nothing dropped."""
    lines: list[str] = []
    for word in text.split():
        while face.getlength(word) > width:  # a path or id wider than the image
            cut = 1
            while face.getlength(word[: cut + 1]) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        if lines and face.getlength(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        elif word:
            lines.append(word)
    return lines


def caption_text(title: str, arena: tuple[float | None, float | None, bool] | None) -> str:
    """The caption under the panels: TITLE and what the marks are."""
    edge = ("; dark lines: the arena's walls" if arena[2] else "; dashed: the start area (positions are "
            "unbounded)") if arena else "; no arena boundary declared"  # fmt: skip
    return f"{title} (coloured: agents and their trails; grey: landmarks{edge})"


def render_frames(trajectories: dict[str, Any], title: str) -> list[Image.Image]:
    """One image per step: every episode's panel at that step (a finished episode holds its last)."""
    positions, returns, lengths = episode_arrays(trajectories)
    arena = arena_of(trajectories)
    box = view_box(positions, arena)
    episodes = returns.shape[0]
    face = font()
    width = PANEL * episodes
    caption = wrap(caption_text(title, arena), width - 2 * MARGIN, face)
    line_px = FONT_PX + LINE_GAP
    height = HEADER + PANEL + len(caption) * line_px + MARGIN
    frames = []
    for t in range(max(lengths) + 1):
        image = Image.new("RGB", (width, height), BACKGROUND)
        draw = ImageDraw.Draw(image)
        for k in range(episodes):
            now, left = min(t, lengths[k]), PANEL * k
            panel = Image.new("RGB", (PANEL, HEADER + PANEL), BACKGROUND)  # what is drawn outside is clipped
            pen = ImageDraw.Draw(panel)
            if arena is not None:
                draw_arena(pen, arena, box, 0)
            for name, field in positions.items():
                if name != AGENT_FIELD:
                    for centre in box.pixels(field[k, now], 0):
                        _dot(pen, centre, LANDMARK_R, LANDMARK_COLOR)
            agents = positions[AGENT_FIELD][k]  # [T + 1, N, 2]
            for i in range(agents.shape[1]):
                color = AGENT_COLORS[i % len(AGENT_COLORS)]
                trail = box.pixels(agents[: now + 1, i], 0)
                if len(trail) > 1:
                    pen.line(trail, fill=color, width=2)
                _dot(pen, trail[-1], AGENT_R, color)
            pen.rectangle((0, 0, PANEL - 1, HEADER - 1), fill=BACKGROUND)  # the header over anything drawn there
            pen.text((6, 4), f"episode {k}  step {now}/{lengths[k]}  return {returns[k, now]:.2f}",
                     fill=TEXT_COLOR, font=face)  # fmt: skip
            image.paste(panel, (left, 0))
            if k:
                draw.line((left, 0, left, HEADER + PANEL), fill=(200, 200, 200))
        for n, line in enumerate(caption):
            draw.text((MARGIN, HEADER + PANEL + n * line_px), line, fill=TEXT_COLOR, font=face)
        frames.append(image)
    return frames


def write_gif(trajectories: dict[str, Any], path: Path, title: str) -> Path:
    """The recorded episodes as an animated GIF at PATH (looping); its path."""
    frames = render_frames(trajectories, title)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=FRAME_MS, loop=0)
    return path
