"""Machinery shared by the statistical kernels; no statistics of its own.

    compiled.py    ``kernel`` (Numba, compiled on first call, no fast-math) and ``on_chunks`` (threads over rows)
    sfc64.py       SFC64 streams spawned from a generator, and the one compiled replicate loop that draws from them
    libm.py        the elementary functions a stage version computes with (numpy's ufuncs or libm)
    lazy_scipy.py  ``scipy.special`` and ``scipy.stats``, imported on first use
"""
