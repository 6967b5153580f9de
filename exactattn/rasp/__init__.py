"""B-RASP, B-RASP[pos] and S-RASP: programs, their exact meaning, and their compilation.

``parse_program`` (text, docs/rasp.md) and ``api`` (Python) build one representation
(``ast``); ``interpret.run`` is its exact meaning (the oracle); ``compile_program`` emits an
exactattn/1 model whose heads say which program line they implement; ``gap`` gives the
compiler's per-head lower bound on the gap γ(n).
"""

from exactattn.rasp.ast import Program, RaspError
from exactattn.rasp.compile import compile_program
from exactattn.rasp.interpret import run
from exactattn.rasp.parse import parse_program

__all__ = ["Program", "RaspError", "compile_program", "parse_program", "run"]
