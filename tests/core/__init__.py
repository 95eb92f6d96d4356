"""Tests of engine.core."""
