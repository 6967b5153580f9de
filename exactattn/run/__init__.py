"""Running the stages: check (shards, executors), one-input evaluation, the precision and
search sweeps past enumeration. The Python API of the CLI."""
