"""Expression design: the model writes each reward term, the shaping potential and each
observation feature as an expression of a small typed language (`parse`), which lero
checks against the task (`check`), renders into a candidate module (`render`) and
constrains the model's decoding to (`grammar`, a GBNF grammar derived from the task).
"""
