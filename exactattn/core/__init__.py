"""The base layer: exact number text, user-facing errors, size limits, JSON I/O, exit codes.

Imports nothing else from exactattn; every other stage may import it."""
