"""A RASP program for tracr that is not in tracr's library: at each position, whether that
position's token occurs more than once in the input (docs/tracr.md, "Your own program").

    python -m exactattn.importers.tracr_compile docs/examples/repeated_tokens.py \\
        --vocab a,b,c --max-seq-len 4 -o build/repeated_tokens
"""

from tracr.rasp import rasp


def program() -> rasp.SOp:
    # how many positions hold the same token as this one (itself included)
    same = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
    return rasp.categorical(rasp.Map(lambda count: count > 1, same)).named("repeated")
