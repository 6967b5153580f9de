"""Importers: models compiled by other tools (tracr), weights kept exactly."""
