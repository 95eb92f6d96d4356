"""Presentation: the text, Markdown, HTML and JUnit forms of certificates, runs and audits.

Reads results and ledger data; computes no statistic of its own.
"""
