"""The defaults a person sees in every front-end, in one torch-free module.

CLI help strings import these without loading torch; ``TrainConfig``, ``evaluate`` and the
sandbox's ``Job`` import them too, so each default has this one home.
"""

DEFAULT_ENV = "simple_spread"  # the MPE task of the LERO paper's experiments
DEFAULT_ALGO = "mappo"
EVAL_EPISODES = 512  # greedy evaluation episodes of a trained policy (one per parallel env)
EVAL_EVERY = 3  # updates between the points of the greedy evaluation curve (training.greedy)
EVAL_SEED = 12345  # the episodes the loop selects candidates on; held-out measurements use others
MAX_EVAL_EPISODES = 8192  # evaluation episodes (one batch of envs): also bounds a result's per-episode lists
