"""Reports for people, shared by `lero report`, `lero eval`, `lero compare`, the console and
the web UI: report.md (run_report), the confirmation's verdict, provenance, figures, numbers,
runs compared, policies re-measured on held-out episodes (held_out, eval_render), TensorBoard
files and a run's status."""
