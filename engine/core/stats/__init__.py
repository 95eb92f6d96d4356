"""Pure statistical kernels: numpy/scipy only, arrays in, frozen dataclasses out; no I/O, no ledger.

One subpackage per method; a frozen stage version's kernel (``*_v<MAJOR>_<MINOR>_<PATCH>.py``) sits next to the
module that replaced it:

    bootstrap/   paired token-weighted bootstrap of ``paired.ppl_ratio`` (percentile and BCa intervals)
    confseq/     confidence sequences, their p-values and the decision layer of ``sequential.diff``
    conformal/   SSBC, Mondrian sets, leave-one-out sets and rate bounds of ``conformal.*``
    bakeoff/     the vendor bake-off of ``bakeoff.*``: calm gate, rapidity pools, pairwise bootstrap
    kernels/     shared machinery: Numba kernels and threads, SFC64 streams and the replicate loop, libm, lazy scipy
    pairing.py   pairing two arms' evaluation windows by id (input to any paired comparison)
"""
