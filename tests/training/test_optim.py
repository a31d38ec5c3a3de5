"""`training.optim.FlatAdam` is torch's foreach Adam / RAdam to the bit, and their saved
states load into each other (learner states written before the switch still resume)."""

from __future__ import annotations

import pytest
import torch

from lero.training.networks import StackedParameters, mlp
from lero.training.optim import FlatAdam

STEPS = 60  # RAdam leaves its un-rectified phase (rho_t > 5) at step 6


def optimizer(kind: str, ours: bool, flat: torch.nn.Parameter, lr: float):
    """Ours or torch's foreach optimizer of KIND, with the eps each learner uses."""
    eps = 1e-5 if kind == "adam" else 1e-8
    if ours:
        return FlatAdam(flat, lr=lr, eps=eps, rectified=kind == "radam")
    torch_class = torch.optim.Adam if kind == "adam" else torch.optim.RAdam
    return torch_class([flat], lr=lr, eps=eps, foreach=True)


def make(kind: str, ours: bool, lr: float = 3e-3) -> tuple[torch.nn.Module, torch.nn.Parameter, object]:
    torch.manual_seed(0)
    net = mlp(7, 16, 4)
    flat = StackedParameters([list(net.parameters())]).flat
    return net, flat, optimizer(kind, ours, flat, lr)


def train_steps(net: torch.nn.Module, flat: torch.nn.Parameter, optimizer, steps: int, seed: int = 1) -> None:
    data = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        loss = net(torch.randn(32, 7, generator=data)).pow(2).mean()
        flat.grad.zero_()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(net.parameters()), 0.5)
        optimizer.step()


@pytest.mark.parametrize("kind", ["adam", "radam"])
def test_the_same_parameters_and_moments_as_torch_optim_to_the_bit(kind: str) -> None:
    runs = {}
    for ours in (True, False):
        net, flat, optimizer = make(kind, ours)
        train_steps(net, flat, optimizer, STEPS)
        runs[ours] = (flat.detach().clone(), optimizer.state_dict())
    (mine, my_state), (theirs, their_state) = runs[True], runs[False]
    assert not torch.equal(mine, make(kind, True)[1].detach())  # it did train
    assert torch.equal(mine, theirs)
    for key in ("step", "exp_avg", "exp_avg_sq"):
        assert torch.equal(my_state["state"][0][key], their_state["state"][0][key]), key


@pytest.mark.parametrize("kind", ["adam", "radam"])
@pytest.mark.parametrize("first_ours", [False, True])
def test_saved_states_cross_load_and_continue_to_the_same_bits(kind: str, first_ours: bool) -> None:
    """Half the steps with one implementation, its state_dict loaded into the other (built
    with a wrong lr, which the saved one replaces), the rest there: the same bits as one
    uninterrupted run of ours."""
    net, flat, whole = make(kind, True, lr=1e-3)
    train_steps(net, flat, whole, STEPS // 2)
    train_steps(net, flat, whole, STEPS - STEPS // 2, seed=2)
    uninterrupted = flat.detach().clone()

    net, flat, first = make(kind, first_ours, lr=1e-3)
    train_steps(net, flat, first, STEPS // 2)
    second = optimizer(kind, not first_ours, flat, lr=5.0)
    second.load_state_dict(first.state_dict())
    assert second.state_dict()["param_groups"][0]["lr"] == 1e-3
    train_steps(net, flat, second, STEPS - STEPS // 2, seed=2)
    assert torch.equal(flat.detach(), uninterrupted)


def test_a_parameter_without_a_grad_buffer_is_refused() -> None:
    with pytest.raises(ValueError, match="grad buffer"):
        FlatAdam(torch.nn.Parameter(torch.zeros(3)), lr=1e-3)
