"""Statistical kernels: pure functions of arrays (numpy, scipy, numba), no I/O."""
