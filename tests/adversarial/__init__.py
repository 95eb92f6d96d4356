"""Adversarial sweep: generated hostile cases run through the certa command in-process."""
