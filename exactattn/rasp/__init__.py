"""B-RASP, B-RASP[pos] and S-RASP programs and their exact meaning: the RASP language.

``parse_program`` (text, docs/rasp.md) and ``api`` (Python) build one representation
(``ast``); ``check`` checks names, types and cycles; ``interpret.run`` is its exact meaning
(the oracle); ``unparse`` writes a program back as text. The language sits on the floor
beside ``logic/`` and imports nothing else of the package: its compiler
(``constructions/rasp_compile.py``, with the per-head gap bounds ``constructions/rasp_gap.py``
and the compiled models' claims ``constructions/rasp_claims.py``) is a construction, a stage
above, like the LTL compiler.
"""

from exactattn.rasp.ast import Program, RaspError
from exactattn.rasp.interpret import run
from exactattn.rasp.parse import parse_program

__all__ = ["Program", "RaspError", "parse_program", "run"]
