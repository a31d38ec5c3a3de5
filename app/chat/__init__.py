"""Designing an experiment in a conversation: the desk (the draft spec and every action on
it), the dialogue loops, the spec filled from plain words, and `lero chat` in the terminal
(the web UI's chat page is app.ui.chat)."""
