"""``python -m certa ...``: the ``certa`` command."""

from certa.cli import main

main()
