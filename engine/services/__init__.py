"""The services: what a command does, above the core and the ledger.

Run and record (``run``), audit and replay (``audit``), reviews, attestations, batches, and presentation
(``presentation``: Markdown, HTML, JUnit, explanations). ``cli.py`` calls one service per command and prints
the result's own text or JSON form.
"""
