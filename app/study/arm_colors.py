"""One colour per arm in every figure lero draws (a run's, a comparison's, a study's), so a
reader who learnt "native is blue" in one figure reads every other one without its legend.

The arms are the study's variants (`app.study.variants.VARIANTS`: native, hrf, oef, hrf+oef)
and `native@loop`; a run's candidate is drawn as the study's `hrf+oef` (both of its
functions on), a longer-budget arm (`<variant>@<K>x`) in its variant's colour, dashed. Arms
of no declared colour (the runs of a comparison, a second confirmed candidate) take
`EXTRA_COLORS` in turn. Okabe and Ito's palette: told apart by colour-blind readers and in
greyscale print.
"""

from __future__ import annotations

from lero.app.study.variants import LOOP_ARM, VARIANTS, step_multiple

VARIANT_COLORS = dict(zip(VARIANTS, ("#0072B2", "#CC79A7", "#009E73", "#D55E00"), strict=True))
ARM_COLORS = {**VARIANT_COLORS, LOOP_ARM: "#56B4E9"}  # native's lighter blue: native, given more steps
NATIVE = VARIANTS[0]
CANDIDATE = VARIANTS[-1]  # a run's candidate: both of its functions on
EXTRA_COLORS = ("#E69F00", "#000000", "#999999", "#F0E442", "#882255", "#44AA99")
LONGER = "--"  # line style of an arm trained K times longer


def arm_color(arm: str, extra: int = 0) -> str:
    """ARM's colour (a `<variant>@<K>x` arm: its variant's); EXTRA_COLORS[EXTRA] for an arm
    with no colour of its own."""
    base = arm.split("@", 1)[0] if step_multiple(arm) else arm
    return ARM_COLORS.get(base, EXTRA_COLORS[extra % len(EXTRA_COLORS)])


def arm_line(arm: str) -> str:
    """ARM's line style: dashed for an arm trained K times longer, solid otherwise."""
    return LONGER if step_multiple(arm) else "-"
