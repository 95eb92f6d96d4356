"""Alembic environment: run the ledger's migrations on the connection ``certa.ledger.migrate`` passes in.

That connection is already inside certa's transaction, so Alembic's ``begin_transaction`` does not
commit: every revision of one upgrade, and the stamp before it, commit or roll back together.
"""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the ledger's migrations run through 'certa migrate' (certa.ledger.migrate), which passes the "
                       "database connection; there is no alembic.ini")
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
