"""Learners (one file per algorithm family) and the small pieces they share."""
