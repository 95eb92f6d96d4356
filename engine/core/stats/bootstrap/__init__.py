"""The paired, token-weighted bootstrap of ``paired.ppl_ratio``.

    weighted_mean.py         1.1.0 and later: compiled SFC64 replicates (uniform: Lemire indices; token_weighted:
                             Walker alias), the token-weighted mean, the percentile and BCa intervals (z0, the
                             jackknife acceleration a in O(n)), shared by every version
    weighted_mean_v1_0_0.py  frozen 1.0.0 resampling: numpy PCG64 index blocks
"""
