"""Task grammars on the generic genome: the goal and communication terms and the
observation features of the two MPE communication tasks (`TaskSpec.grammar`
`simple_reference` and `simple_speaker_listener`).

The generic grammar (`generic.py`) knows only the env's own reward and positions, so it
has no word for what these tasks are about: the message (a symbol heard by the other
agent), the listener's goal, each agent's own target. A grammar here adds those genes to
the generic reward terms (`env`, `team_mean`, `team_min`, `others_mean`); its genome,
schema, breeding and renderer are the generic ones (`Vocabulary.of` picks the grammar).

Messages use one fixed code in every term and feature: symbol l names landmark l (the
landmark whose colour is shown is landmark `argmax(colour)`), so a term can reward
saying the partner's target and moving where the heard symbol points before the agents
have agreed on a code of their own.

Rows of `enhance_observation`'s `obs` belong to agent `m % N` (training/contract.py):
in simple_speaker_listener row m is the speaker when m is even, the listener when odd,
and each role's features are zero on the other role's rows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskGrammar:
    """One task's genes beyond the generic ones. Reward expressions read the names
    `reward_setup` defines (its `{state}` is the state dict: `ctx.state` in the reward,
    `state` in the potential); feature expressions read `obs`, `M`, `L` and the names
    `feature_setup` defines, whose `{slot}` fields are the task's `obs_layout` columns.
    `potentials` are terms rendered into `potential(state, obs)` as Phi (lero adds
    gamma Phi(s') - Phi(s)): the potential forms of the distance goals."""

    name: str
    goals: tuple[str, ...]  # terms that measure the task itself (a genome keeps one)
    terms: dict[str, tuple[str, str, str]]  # kind -> (shape, raw expression, meaning)
    reward_setup: tuple[str, ...]
    features: dict[str, tuple[str, str]]  # name -> (expression [M, k], meaning)
    feature_setup: tuple[str, ...]
    slots: tuple[str, ...]  # the obs_layout slots the features read
    prior_terms: dict[str, tuple[float, str]]  # the hand-written first guess
    prior_features: tuple[str, ...]
    potentials: tuple[str, ...] = ()  # kinds of `terms` that are potentials, not reward terms


# Both tasks' landmarks and messages, as reward-context tensors (N = 2 agents, L = 3 landmarks).
_WORLD = (
    'agent_pos = {state}["agent_pos"]  # [B, N, 2]',
    'agent_vel = {state}["agent_vel"]  # [B, N, 2]',
    'landmark_pos = {state}["landmark_pos"]  # [B, L, 2]',
    "L = landmark_pos.shape[1]",
)
_HEARD = (  # the heard symbol's landmark, on obs rows
    "heard = obs[:, {heard}]  # [M, C] one-hot symbol heard last step (zeros: silence)",
    "heard_symbol = heard.argmax(dim=-1)  # [M]",
    "named = ((heard.sum(dim=-1) > 0) & (heard_symbol < L)).float()[:, None]  # [M, 1] a landmark was named",
    "landmarks = obs[:, {landmark_rel}].reshape(M, L, 2)  # [M, L, 2] landmark - self",
    "landmark_dist = torch.linalg.norm(landmarks, dim=-1)  # [M, L]",
    "named_offset = landmarks[torch.arange(M, device=obs.device), heard_symbol.clamp(max=L - 1)]  # [M, 2]",
)

SIMPLE_REFERENCE = TaskGrammar(
    name="simple_reference",
    goals=("own_goal", "partner_goal", "reached"),
    terms={
        "own_goal": ("[B, N]", "-goal_dist", "minus the agent's distance to its own target landmark"),
        "partner_goal": ("[B, N]", "-goal_dist.flip(1)",
                         "minus the partner's distance to its target (the goal this agent sees and must tell)"),
        "reached": ("[B]", "(goal_dist < {reach_dist}).float().mean(dim=1)",
                    "team: share of agents on their own target"),
        "goal_approach": ("[B, N]", "(agent_vel * goal_offset).sum(dim=-1) / (goal_dist + 1e-6)",
                          "the agent's speed towards its own target"),
        "own_goal_potential": ("[B, N]", "-goal_dist", "potential Phi: minus the agent's distance to its own "
                               "target (lero adds gamma Phi(s') - Phi(s): policy-invariant shaping)"),
        "partner_goal_potential": ("[B, N]", "-goal_dist.flip(1)", "potential Phi: minus the partner's distance "
                                   "to its target (policy-invariant shaping)"),
        "names_partner_goal": ("[B, N]", "(said == target.flip(1)).float() * spoke",
                               "1 when the agent's last symbol names its partner's target (symbol l = landmark l)"),
        "follows_message": ("[B, N]", "(agent_vel * named_offset).sum(dim=-1) / (named_dist + 1e-6) * named",
                            "the agent's speed towards the landmark its partner's last symbol names"),
    },
    reward_setup=(
        *_WORLD,
        'target = {state}["target"]  # [B, N] the landmark each agent must reach',
        "goal_offset = landmark_pos.gather(1, target[..., None].expand(-1, -1, 2)) - agent_pos  # [B, N, 2]",
        "goal_dist = torch.linalg.norm(goal_offset, dim=-1)  # [B, N]",
        'said = {state}["comm"].argmax(dim=-1)  # [B, N] each agent\'s last symbol',
        'spoke = ({state}["comm"].sum(dim=-1) > 0).float()  # [B, N] 0 while silent',
        "heard = said.flip(1)  # [B, N] the partner's last symbol",
        "named = spoke.flip(1) * (heard < L).float()  # [B, N] the partner named a landmark",
        "named_offset = landmark_pos.gather(1, heard.clamp(max=L - 1)[..., None].expand(-1, -1, 2)) - agent_pos",
        "named_dist = torch.linalg.norm(named_offset, dim=-1)  # [B, N]",
    ),
    features={
        "landmark_dist": ("landmark_dist", "distance to each landmark"),
        "partner_goal_symbol": ("torch.nn.functional.one_hot(obs[:, {goal_color}].argmax(dim=-1), L).float()",
                                "the symbol to say: one-hot index of the landmark whose colour is shown"),
        "heard_landmark": ("torch.cat([named_offset, torch.linalg.norm(named_offset, dim=-1, keepdim=True)], dim=-1) * named",
                           "offset and distance of the landmark the heard symbol names (zeros when none)"),
        "speed": ("torch.linalg.norm(obs[:, {self_vel}], dim=-1, keepdim=True)", "own speed"),
    },
    feature_setup=("L = obs[:, {landmark_rel}].shape[1] // 2  # landmarks", *_HEARD),
    slots=("self_vel", "landmark_rel", "goal_color", "heard"),
    prior_terms={"env": (1.0, "constant"), "names_partner_goal": (0.5, "ramp_down"),
                 "follows_message": (0.5, "ramp_down")},
    prior_features=("partner_goal_symbol", "heard_landmark"),
    potentials=("own_goal_potential", "partner_goal_potential"),
)

SIMPLE_SPEAKER_LISTENER = TaskGrammar(
    name="simple_speaker_listener",
    goals=("listener_goal", "reached"),
    terms={
        "listener_goal": ("[B]", "-goal_dist", "team: minus the listener's distance to the target"),
        "reached": ("[B]", "(goal_dist < {reach_dist}).float()", "team: 1 when the listener is on the target"),
        "goal_approach": ("[B]", "(listener_vel * goal_offset).sum(dim=-1) / (goal_dist + 1e-6)",
                          "team: the listener's speed towards the target"),
        "listener_goal_potential": ("[B]", "-goal_dist", "potential Phi, team: minus the listener's distance to "
                                    "the target (policy-invariant shaping)"),
        "names_goal": ("[B, N]", "torch.stack([(said == target).float() * spoke, torch.zeros_like(spoke)], dim=1)",
                       "the speaker only: 1 when its last symbol names the target (symbol l = landmark l)"),
        "follows_message": ("[B, N]",
                            "torch.stack([torch.zeros_like(spoke), (listener_vel * named_offset).sum(dim=-1) "
                            "/ (named_dist + 1e-6) * spoke], dim=1)",
                            "the listener only: its speed towards the landmark the speaker's last symbol names"),
    },
    reward_setup=(
        *_WORLD,
        'target = {state}["target"]  # [B] the landmark the listener must reach',
        "listener_vel = agent_vel[:, 1]  # [B, 2]; row 0 is the speaker, which cannot move",
        "goal_offset = landmark_pos.gather(1, target[:, None, None].expand(-1, 1, 2)).squeeze(1) - agent_pos[:, 1]  # [B, 2]",
        "goal_dist = torch.linalg.norm(goal_offset, dim=-1)  # [B]",
        'said = {state}["comm"][:, 0].argmax(dim=-1)  # [B] the speaker\'s last symbol',
        'spoke = ({state}["comm"][:, 0].sum(dim=-1) > 0).float()  # [B] 0 while silent',
        "named_offset = landmark_pos.gather(1, said.clamp(max=L - 1)[:, None, None].expand(-1, 1, 2)).squeeze(1) - agent_pos[:, 1]",
        "named_dist = torch.linalg.norm(named_offset, dim=-1)  # [B]",
    ),
    features={
        "goal_symbol": ("torch.nn.functional.one_hot(obs[:, {goal_color}].argmax(dim=-1), L).float() * speaker",
                        "speaker: the symbol to say, one-hot index of the target landmark (from its colour)"),
        "landmark_dist": ("landmark_dist * listener", "listener: distance to each landmark"),
        "heard_landmark": ("torch.cat([named_offset, torch.linalg.norm(named_offset, dim=-1, keepdim=True)], dim=-1) "
                           "* named * listener",
                           "listener: offset and distance of the landmark the heard symbol names"),
        "speed": ("torch.linalg.norm(obs[:, {self_vel}], dim=-1, keepdim=True) * listener", "listener: own speed"),
    },
    feature_setup=(
        "L = obs[:, {landmark_rel}].shape[1] // 2  # landmarks",
        "listener = (torch.arange(M, device=obs.device) % 2 == 1).float()[:, None]  # [M, 1] row m is agent m % 2",
        "speaker = 1.0 - listener",
        *_HEARD,
    ),
    slots=("self_vel", "landmark_rel", "goal_color", "heard"),
    prior_terms={"env": (1.0, "constant"), "names_goal": (0.5, "ramp_down"), "follows_message": (0.5, "ramp_down")},
    prior_features=("goal_symbol", "heard_landmark"),
    potentials=("listener_goal_potential",),
)

TASK_GRAMMARS = {g.name: g for g in (SIMPLE_REFERENCE, SIMPLE_SPEAKER_LISTENER)}
