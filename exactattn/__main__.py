"""``python -m exactattn`` runs the CLI."""

from .cli import main

main()
