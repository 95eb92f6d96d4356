"""Tests of engine.core.evidence: the readers of evaluator exports, on real fixtures and hostile input."""
