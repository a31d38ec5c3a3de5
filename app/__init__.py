"""lero's app around the engine: CLI, console, chat, web UI, reports.

Every entry (the `lero` command, the web UI's run workers) imports this package first,
so it settles how torch's OpenMP threads wait before anything imports torch.
"""

from lero.training.openmp import settle_openmp_wait

settle_openmp_wait()
