"""`lero study`: does a candidate's HRF, OEF or both beat native training, and by how much?

Ablation variants (variants.py), settings (spec.py), execution with resume (execute.py),
statistics (stats.py), study.json / study.md (report.py) and plots (plots.py).
"""

from lero.app.study.execute import plan_study, run_study
from lero.app.study.plan import Plan
from lero.app.study.spec import PAPER_ALGOS, StudySpec
from lero.app.study.variants import VARIANTS, variant_code

__all__ = ["PAPER_ALGOS", "VARIANTS", "Plan", "StudySpec", "plan_study", "run_study", "variant_code"]
