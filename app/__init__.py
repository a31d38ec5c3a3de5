"""lero's app around the engine, one room per thing a person touches: the command line
(cli), reports (reports), the console (console), chat (chat), studies (study) and the web
UI (ui).

Every entry (the `lero` command, the web UI's run workers) imports this package first,
so it settles how torch's OpenMP threads wait before anything imports torch.
"""

from lero.training.openmp import settle_openmp_wait

settle_openmp_wait()
