"""certa's core: pure computation on data already read (the evidence readers of evaluator exports first)."""
