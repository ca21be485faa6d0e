"""`python -m kiln ...`: the kiln CLI, as the `kiln` entry point runs it."""

from ._cli import main

main()
