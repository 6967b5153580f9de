"""Constructions: formulas and programs compiled into format-1 model dicts (LTL, Dyck, …)."""
