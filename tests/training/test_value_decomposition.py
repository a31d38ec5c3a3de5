"""The Q(lambda) targets of the PQN-style VDN / QMIX learner, against their definition."""

import torch
from lero.training.algos.value_decomposition import lambda_returns

REWARD = torch.tensor([[1.0, -1.0], [2.0, 0.5], [3.0, 1.5]])  # [T, B]
DONE = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # [T, B]: slot 1 ends at t=1
NEXT_VALUE = torch.tensor([[10.0, 4.0], [20.0, 5.0], [30.0, 6.0]])  # [T, B] V(s_{t+1})
GAMMA = 0.9


def test_lambda_zero_is_one_step_td() -> None:
    expected = REWARD + GAMMA * (1.0 - DONE) * NEXT_VALUE
    assert torch.allclose(lambda_returns(REWARD, DONE, NEXT_VALUE, GAMMA, 0.0), expected)


def test_lambda_one_is_the_discounted_return_bootstrapped_at_the_end() -> None:
    targets = lambda_returns(REWARD, DONE, NEXT_VALUE, GAMMA, 1.0)
    # slot 0 never ends: r0 + g r1 + g^2 r2 + g^3 V(s_3)
    assert torch.isclose(targets[0, 0], torch.tensor(1.0 + GAMMA * 2.0 + GAMMA**2 * 3.0 + GAMMA**3 * 30.0))
    # slot 1 ends at t=1: nothing after the end flows back, the new episode bootstraps itself
    assert torch.isclose(targets[0, 1], torch.tensor(-1.0 + GAMMA * 0.5))
    assert torch.isclose(targets[2, 1], torch.tensor(1.5 + GAMMA * 6.0))


def test_intermediate_lambda_blends_value_and_return() -> None:
    lam = 0.3
    targets = lambda_returns(REWARD, DONE, NEXT_VALUE, GAMMA, lam)
    last = REWARD[2] + GAMMA * NEXT_VALUE[2]
    middle = REWARD[1] + GAMMA * (1.0 - DONE[1]) * ((1 - lam) * NEXT_VALUE[1] + lam * last)
    first = REWARD[0] + GAMMA * ((1 - lam) * NEXT_VALUE[0] + lam * middle)
    assert torch.allclose(targets, torch.stack([first, middle, last]))
