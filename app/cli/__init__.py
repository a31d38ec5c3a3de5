"""The command line: `lero` (main), its grammar shared by every front-end (args), the run a
person names (named_run), the terminal-less driver the web UI's workers execute (worker) and
the app's part of every run it drives (run_hooks)."""
