"""Episodes drawn as an animated GIF (`lero eval --render`): agents, landmarks, the agents'
trails, the step and the return so far, one panel per episode side by side.

It draws what a trusted evaluate job recorded (`training.EpisodeTrace`, checked by
`sandbox.results` as nested finite numbers); shapes are checked again here, since a cached
result is a file. Pillow only: no display, no video encoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from lero.graph.configuration import RunError

PANEL = 320  # pixels per episode panel (square)
MARGIN = 16
AGENT_R, LANDMARK_R = 7, 5  # pixels
FRAME_MS = 120
AGENT_FIELD = "agent_pos"  # the world field drawn as agents with trails; other `*_pos` fields as landmarks
AGENT_COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]  # fmt: skip
LANDMARK_COLOR, TEXT_COLOR, BACKGROUND = (90, 90, 90), (20, 20, 20), (255, 255, 255)


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


def _to_pixels(points: np.ndarray, low: np.ndarray, span: float, left: int) -> list[tuple[float, float]]:
    """World x/y [X, 2] -> pixel centres in the panel starting at LEFT (y up)."""
    scale = (PANEL - 2 * MARGIN) / span
    xs = left + MARGIN + (points[:, 0] - low[0]) * scale
    ys = PANEL - MARGIN - (points[:, 1] - low[1]) * scale
    return list(zip(xs.tolist(), ys.tolist(), strict=True))


def _dot(draw: ImageDraw.ImageDraw, centre: tuple[float, float], radius: int, fill: tuple[int, ...]) -> None:
    x, y = centre
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=fill, outline=TEXT_COLOR)


def render_frames(trajectories: dict[str, Any], title: str) -> list[Image.Image]:
    """One image per step: every episode's panel at that step (a finished episode holds its last)."""
    positions, returns, lengths = episode_arrays(trajectories)
    every = np.concatenate([p.reshape(-1, 2) for p in positions.values()])  # [*, 2]
    low, high = every.min(axis=0), every.max(axis=0)
    span = float(max(high - low)) or 1.0
    episodes = returns.shape[0]
    frames = []
    for t in range(max(lengths) + 1):
        image = Image.new("RGB", (PANEL * episodes, PANEL + 24), BACKGROUND)
        draw = ImageDraw.Draw(image)
        draw.text((6, PANEL + 6), f"{title}  (coloured: agents and their trails; grey: landmarks)", fill=TEXT_COLOR)
        for k in range(episodes):
            now, left = min(t, lengths[k]), PANEL * k
            if k:
                draw.line((left, 0, left, PANEL), fill=(200, 200, 200))
            for name, field in positions.items():
                if name != AGENT_FIELD:
                    for centre in _to_pixels(field[k, now], low, span, left):
                        _dot(draw, centre, LANDMARK_R, LANDMARK_COLOR)
            agents = positions[AGENT_FIELD][k]  # [T + 1, N, 2]
            for i in range(agents.shape[1]):
                color = AGENT_COLORS[i % len(AGENT_COLORS)]
                trail = _to_pixels(agents[: now + 1, i], low, span, left)
                if len(trail) > 1:
                    draw.line(trail, fill=color, width=2)
                _dot(draw, trail[-1], AGENT_R, color)
            draw.text((left + 6, 4), f"episode {k}  step {now}/{lengths[k]}  return {returns[k, now]:.2f}",
                      fill=TEXT_COLOR)  # fmt: skip
        frames.append(image)
    return frames


def write_gif(trajectories: dict[str, Any], path: Path, title: str) -> Path:
    """The recorded episodes as an animated GIF at PATH (looping); its path."""
    frames = render_frames(trajectories, title)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=FRAME_MS, loop=0)
    return path
