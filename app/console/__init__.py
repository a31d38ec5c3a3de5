"""The terminal side of a run: its progress drawn from the engine's events, and the
interactive approvals (each candidate's card is shared with the web UI)."""
