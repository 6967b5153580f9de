"""The package version (here, below every stage, so result files and checkpoints can name it)."""

__version__ = "0.2.0"
