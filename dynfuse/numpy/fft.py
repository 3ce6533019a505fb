"""``numpy.fft`` for lazy arrays: NumPy's transforms, run on materialized inputs (their complex
results are beyond the dtypes dynfuse records), counted as fallbacks by name."""

import numpy as _np

from ._namespace import fall_through as _fall_through

_fall_through(globals(), _np.fft)
