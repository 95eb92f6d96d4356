"""Confidence sequences for a mean and the sequential decisions read off them (``sequential.diff``).

    methods.py     one entry point over the methods, and the p-value for mean = m0 that goes with each
    common.py      the path result, [0, 1] scaling, predictable plug-in quantities (Waudby-Smith & Ramdas 2023)
    betting.py     hedged-capital betting CS and its anytime-valid p-value (e-process)
    eb.py          predictable plug-in empirical-Bernstein CS, closed form
    stitched.py    empirical-Bernstein CS with the polynomial-stitched boundary (Howard et al. 2021)
    asymptotic.py  asymptotic CS for unbounded scores (Robbins normal mixture, plug-in variance)
    fixed_n.py     the seed's fixed-n intervals at every prefix (not valid under optional stopping)
    decision.py    the DIFFERENT / IDENTICAL / SAME / UNDECIDED rules on one sequence
"""
