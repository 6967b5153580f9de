"""``python -m exactattn`` runs the CLI."""

from exactattn.cli import main

main()
