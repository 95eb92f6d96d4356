"""The core: spec → plan → stages → gates → certificate, with the numerical kernels (``stats``) under it.

Pure computation over tables already read: it imports the foundation and never the ledger, the services or
any presentation. What a stage reads from a ledger comes through the ``LedgerReader`` protocol
(``certa.engine.core.stages.base``), which the services implement.
"""
