"""`python -m hag.cli` is `hag`."""

from hag.cli import main

main()
