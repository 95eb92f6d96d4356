"""Tests of the stages in engine.core.stages, run end to end through specs."""
