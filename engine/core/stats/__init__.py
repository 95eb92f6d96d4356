"""Pure statistical kernels: numpy/scipy only, arrays in, frozen dataclasses out; no I/O, no ledger."""
