"""User text made literal: LaTeX text mode and Markdown (every string a user controls goes
through one of these). Below the renderers and :mod:`exactattn.report.closed`, which all use
them."""

from __future__ import annotations

import re

_TEXT_ESCAPES = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "%": r"\%",
    "^": r"\^{}",
    "~": r"\~{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "γ": r"$\gamma$",
    "ε": r"$\varepsilon$",
    "τ": r"$\tau$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "≠": r"$\ne$",
    "∞": r"$\infty$",
    "…": r"\dots{}",
    "—": "---",
    "–": "--",
    "−": "$-$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "‖": r"$\|$",
    "∈": r"$\in$",
    "→": r"$\to$",
    "’": "'",
    "‘": "`",
    "“": "``",
    "”": "''",
}


_GREEK_LOWER = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi - pi rho varsigma "
    "sigma tau upsilon phi chi psi omega"
).split()
_GREEK_UPPER = {"Γ": "Gamma", "Δ": "Delta", "Θ": "Theta", "Λ": "Lambda", "Ξ": "Xi", "Π": "Pi"}
_GREEK_UPPER |= {"Σ": "Sigma", "Υ": "Upsilon", "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega"}
for _k, _name in enumerate(_GREEK_LOWER):  # α … ω (ο is the Latin o): formal-language alphabets
    if _name != "-":
        _TEXT_ESCAPES.setdefault(chr(0x3B1 + _k), rf"$\{_name}$")
for _ch, _name in _GREEK_UPPER.items():
    _TEXT_ESCAPES.setdefault(_ch, rf"$\{_name}$")


def text(s: str) -> str:
    """Escape free text for LaTeX text mode; unknown non-ASCII is spelled as its code point."""
    out = []
    for ch in s:
        if ch in _TEXT_ESCAPES:
            out.append(_TEXT_ESCAPES[ch])
        elif ord(ch) < 32 or ord(ch) == 127:  # a newline in a name must not start a line
            out.append(f"[U+{ord(ch):04X}]")
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append(f"[U+{ord(ch):04X}]")
    return "".join(out)


def _visible(text: str) -> str:
    """Control characters (a newline in a name) as escapes, so user text stays on its line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!&~$])")  # ~: GFM strikethrough, $: GitHub math


def plain(text: str) -> str:
    """User text as literal Markdown: no emphasis, links, images, HTML or table breaks."""
    return _MD_SPECIAL.sub(r"\\\1", _visible(text))
