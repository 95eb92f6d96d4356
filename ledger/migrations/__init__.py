"""Alembic migration environment of the ledger (``env.py``) and its revisions (``versions/``); run by
``certa.ledger.migrate``, configured there in code (no ``alembic.ini``)."""
