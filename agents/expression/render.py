"""A checked expression design as a candidate module: the HRF sums its terms, `potential`
returns Φ, the OEF appends its features. Each expression sits on a line of its own that
names its slot, so a traceback's line number says which expression failed (`slot_at`).

Its twin is agents/offline/render.py: the same step (a design made a candidate module) for
the offline designer's genomes.
"""

from __future__ import annotations

import re

from lero.agents.expression.expression_design import HEADER, POTENTIAL, ExpressionDesign, checked
from lero.agents.offline.render import SCHEDULE_FACTOR
from lero.agents.records import Problem

SLOT_MARK = "  # slot: "


def render_module(design: ExpressionDesign, task: Problem) -> str:
    """The module of a design; ExpressionError names the first expression that does not check."""
    values = checked(design, task)
    lines = [f"{HEADER}{design.to_json()}", "import torch", "", "",
             "def hybrid_reward(ctx):",
             "    zero = torch.zeros_like(ctx.env_reward)  # [B, N]",
             "    progress = float(ctx.progress)",
             "    components = {}"]
    for slot in design.of("term"):
        factor = SCHEDULE_FACTOR[slot.schedule]
        lines.append(f'    components["{slot.name}"] = {slot.weight!r} * {factor}(zero + {values[slot.label].code})'
                     f"{SLOT_MARK}{slot.label}")
    lines += ["    return sum(components.values()), components  # [B, N] and each [B, N]"]
    for slot in design.of(POTENTIAL):
        lines += ["", "", "def potential(state, obs):",
                  '    """Φ [B, N] of one state: lero adds γ·Φ(s\') − Φ(s) to each agent\'s reward."""',
                  f"    return {slot.weight!r} * (torch.zeros_like(obs[..., 0]) + {values[slot.label].code})"
                  f"{SLOT_MARK}{slot.label}"]
    lines += ["", "", "def enhance_observation(obs):",
              "    zero = torch.zeros_like(obs[..., 0])  # [M]",
              "    features = []"]
    for slot in design.of("feature"):
        lines.append(f"    features.append((zero + {values[slot.label].code}).unsqueeze(-1)){SLOT_MARK}{slot.label}")
    lines.append("    return torch.cat([obs, *features], dim=-1)  # [M, D + features]")
    return "\n".join(lines) + "\n"


def slot_at(code: str, error: str) -> str | None:
    """The label of the slot on the last line of `code` that `error` (a traceback) names."""
    lines = code.splitlines()
    for number in reversed([int(n) for n in re.findall(r"line (\d+)", error)]):
        if 1 <= number <= len(lines) and SLOT_MARK in lines[number - 1]:
            return lines[number - 1].split(SLOT_MARK, 1)[1].strip()
    return None
