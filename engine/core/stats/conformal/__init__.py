"""Class-conditional (Mondrian) split conformal prediction with small-sample guarantees (``conformal.*``).

    ssbc.py         small-sample beta correction of the miscoverage level, per class
    mondrian.py     class thresholds, binary prediction sets and their summaries
    loo.py          leave-one-out prediction sets with k fixed, in O(n log n)
    rate_bounds.py  prediction bounds for an event's rate on a future test set
"""
