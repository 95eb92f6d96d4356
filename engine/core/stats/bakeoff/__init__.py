"""The vendor bake-off of seed 002 (``bakeoff.gate``, ``bakeoff.compare``, ``bakeoff.merge``).

    calm_gate.py           the calm gate g in [0, 1] from telemetry lanes
    pool.py                rapidity (atanh) pooling: decision values, exact fixed-point sums, bands, ranking
    pairwise_bootstrap.py  seeded bootstrap of every vendor pair, Holm-adjusted p-values
    v1_0_0.py              frozen 1.0.0 kernels of both (numpy arctanh, numpy PCG64 index blocks)
"""
