"""Certificates at every length from claimed bounds (issue 23).

``claimed`` parses and evaluates the optional ``claims`` object of a model file (expressions in
n for a lower bound on γ(n), an upper bound on x_max(n) and a lower bound on the margin μ(n));
``verify`` holds them against what ``check`` measured; ``certify`` evaluates Theorems 3–5 of
``proofs/`` at one length N from the claims alone (no enumeration); ``render`` writes the
certificate as Markdown or LaTeX; ``cli`` is the ``exactattn certify`` command.
"""
