"""The Q(lambda) targets of the PQN-style VDN / QMIX learner, against their definition."""

import torch

from lero.training.algos.value_decomposition import lambda_returns

REWARD = torch.tensor([[1.0, -1.0], [2.0, 0.5], [3.0, 1.5]])  # [T, B]
TRUNCATED = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # [T, B]: slot 1 hits the limit at t=1
NEXT_VALUE = torch.tensor([[10.0, 4.0], [20.0, 5.0], [30.0, 6.0]])  # [T, B] V(s_{t+1})
OWN_VALUE = torch.tensor([[7.0, 8.0], [9.0, -40.0], [11.0, 12.0]])  # [T, B] Q_tot(o_t, a_t)
GAMMA = 0.9


def targets(lam: float) -> torch.Tensor:
    return lambda_returns(REWARD, TRUNCATED, NEXT_VALUE, OWN_VALUE, GAMMA, lam)


def test_lambda_zero_is_one_step_td_and_truncated_steps_keep_their_own_value() -> None:
    expected = REWARD + GAMMA * NEXT_VALUE
    expected[1, 1] = OWN_VALUE[1, 1]  # no TD target across the time limit
    assert torch.allclose(targets(0.0), expected)


def test_lambda_one_is_the_discounted_return_bootstrapped_at_the_end() -> None:
    result = targets(1.0)
    # slot 0 never ends: r0 + g r1 + g^2 r2 + g^3 V(s_3)
    assert torch.isclose(result[0, 0], torch.tensor(1.0 + GAMMA * 2.0 + GAMMA**2 * 3.0 + GAMMA**3 * 30.0))
    # slot 1 is cut at t=1: the return before bootstraps from the estimate there, the new
    # episode after it bootstraps itself
    assert torch.isclose(result[0, 1], torch.tensor(-1.0 + GAMMA * -40.0))
    assert torch.isclose(result[2, 1], torch.tensor(1.5 + GAMMA * 6.0))


def test_intermediate_lambda_blends_value_and_return() -> None:
    lam = 0.3
    last = REWARD[2] + GAMMA * NEXT_VALUE[2]
    middle = REWARD[1] + GAMMA * ((1 - lam) * NEXT_VALUE[1] + lam * last)
    middle[1] = OWN_VALUE[1, 1]
    first = REWARD[0] + GAMMA * ((1 - lam) * NEXT_VALUE[0] + lam * middle)
    assert torch.allclose(targets(lam), torch.stack([first, middle, last]))
