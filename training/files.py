"""The names of the files training writes into a policy directory, torch-free: the sandbox's
kinds table declares them as a job's inputs and outputs without importing torch."""

POLICY_FILE = "policy.pt"  # the policy's weights and metadata (training.policy)
LEARNER_FILE = "learner.pt"  # the learner's own state, to resume training (training.resume)
