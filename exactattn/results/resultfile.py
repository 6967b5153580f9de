"""Validation of ``exactattn-result/1`` files before ``report`` renders them.

A result file may be hand-edited, truncated or hostile. Every field the report writers and
figures read is checked here for its type and shape, so a bad file ends in one message
naming the JSON path (exit 2), never in a traceback. Unknown keys are allowed (extensions).

Why the per-length checks here do not go through :class:`~exactattn.results.entry.LengthEntry`
(the one parse of a per-length entry: its keys and their JSON types). They are value rules of
a *result file*, which that parse must not have, and routing them through it would change what
``report`` prints:

* ``LengthEntry`` also reads checkpoint shards, whose exact endpoints are written ``"m*2^e"``.
  The number grammar here (decimal or ``p/q``, at most MAX_NUMBER_TEXT characters) refuses
  that text in a result file; in ``LengthEntry`` it would refuse every shard, and relaxing it
  here would accept a file ``report`` refuses today.
* n ≥ 1 and ≤ MAX_RESULT_N, no n twice (a rule across entries), counts ≥ 0, ``inputs`` not
  null, ``invariant`` one of three words, lower end ≤ upper end, token lengths, and the
  fields inside witnesses, ``bounds`` and ``tau_star`` (which ``LengthEntry`` keeps as written,
  by design) are checked only here.
* Parsing with ``LengthEntry`` first would replace this module's messages for a type error
  both catch (``inputs: "x"``: "expected an integer or null" instead of "expected an integer
  >= 0 … (fix: …)"), and a gate after these checks would only add a second message for the
  few keys checked there alone (``hard_ties``, ``first_reference_mismatch``,
  ``reference_compared``…), which ``report`` already refuses with exit 2 when
  :class:`~exactattn.results.views.LengthView` reads them ("lengths[n=…]: malformed entry").

So the shape has one owner (``entry.py``: key names and types) and a result file's value
rules another (this module); a file ``report`` accepts passes both.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

from exactattn.core.errors import ModelError
from exactattn.core.limits import MAX_NAME, clip
from exactattn.core.numbers import MAX_INT_DIGITS, decimal_is_huge, decimal_to_arb

# exponents may be huge: a certified error at τ = 2^-200 is written like 3e-1889…397 (58 digits)
_DEC = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,100})?")
_RAT = re.compile(r"-?[0-9]+(?:/[0-9]+)?")
# a rational p/q with up to MAX_INT_DIGITS digits on each side: check writes such values exactly
# (a γ with a 4,600-digit denominator), so report must read them (issue 27, item 7)
MAX_NUMBER_TEXT = 2 * MAX_INT_DIGITS + 2


def _fail(path: str, message: str) -> None:
    raise ModelError(
        path, message, "regenerate the file with `exactattn check --json` (docs/limits.md)"
    )


def _int(x: Any, path: str, minimum: int | None = 0, maximum: int | None = None) -> None:
    if isinstance(x, bool) or not isinstance(x, int):
        want = "an integer" if minimum is None else f"an integer >= {minimum}"
        _fail(path, f"expected {want}, got {clip(repr(x))}")
    if minimum is not None and x < minimum:
        _fail(path, f"expected an integer >= {minimum}, got {clip(repr(x))}")
    if maximum is not None and x > maximum:
        _fail(path, f"{clip(str(x))} is beyond the limit of {maximum:,}")


def _str(x: Any, path: str, limit: int | None = None) -> None:
    if not isinstance(x, str):
        _fail(path, f"expected a string, got {clip(repr(x))}")
    if limit is not None and len(x) > limit:
        _fail(path, f"a string of {len(x):,} characters (limit {limit:,})")


def _number(x: Any, path: str, rational: bool, allow_inf: bool = False) -> None:
    """A decimal string (``"9.3e-6"``, ``"inf"`` where allowed) or, if ``rational``, ``"p/q"``."""
    if not isinstance(x, str) or len(x) > MAX_NUMBER_TEXT:
        _fail(path, f"expected a number as a string, got {clip(repr(x))}")
    if allow_inf and x in ("inf", "-inf"):
        return
    if (rational and _RAT.fullmatch(x)) or _DEC.fullmatch(x):
        if "/" in x and int(x.split("/")[1]) == 0:
            _fail(path, f"{clip(x)!r} divides by zero")
        return
    kind = "a rational ('p/q') or decimal" if rational else "a decimal"
    _fail(path, f"{clip(x)!r} is not {kind} number")


def _interval(x: Any, path: str, nullable_ends: bool = False, rational: bool = False) -> None:
    if not isinstance(x, dict):
        _fail(path, f"expected an object {{lower, upper}}, got {clip(repr(x))}")
    for end in ("lower", "upper"):
        if end not in x:
            _fail(path, f"missing '{end}'")
        if x[end] is None and nullable_ends:
            continue
        _number(x[end], f"{path}.{end}", rational=rational, allow_inf=True)
    lo, hi = x["lower"], x["upper"]
    if lo is not None and hi is not None and _above(lo, hi):
        _fail(path, f"lower end {clip(lo)} is above upper end {clip(hi)}")


def _above(lo: str, hi: str) -> bool:
    """Whether the number ``lo`` is certainly above ``hi`` (huge exponents compared as balls)."""

    if any("/" not in t and t not in ("inf", "-inf") and decimal_is_huge(t) for t in (lo, hi)):
        if "inf" in (lo, hi) or "-inf" in (lo, hi) or "/" in lo + hi:
            return lo == "inf" or hi == "-inf"
        return bool(decimal_to_arb(lo) > decimal_to_arb(hi))
    return _value(lo) > _value(hi)


def _value(text: str) -> Any:
    """An exact comparable value of a validated number string (Decimal, or Fraction if p/q)."""
    if text in ("inf", "-inf"):
        return Decimal(text)
    if "/" in text:
        return Fraction(text)
    return Decimal(text)


def _opt(x: Any, path: str, check: Any, *args: Any) -> None:
    if x is not None:
        check(x, path, *args)


def _obj(x: Any, path: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        _fail(path, f"expected an object, got {clip(repr(x))}")
    return x


def _list(x: Any, path: str) -> list[Any]:
    if not isinstance(x, list):
        _fail(path, f"expected a list, got {clip(repr(x))}")
    return x


def _word(x: Any, path: str) -> None:
    for i, t in enumerate(_list(x, path)):
        _str(t, f"{path}[{i}]", MAX_NAME)


def validate_result(data: Any, source: str = "result") -> None:
    """Raise :class:`ModelError` (exit 2) naming the first malformed field of a result file."""
    top = _obj(data, source)
    _str(top.get("format"), "format")
    _opt(top.get("model"), "model", _str, MAX_NAME)
    _opt(top.get("model_sha256"), "model_sha256", _str, 64)
    info = top.get("model_info")
    if info is not None:
        info = _obj(info, "model_info")
        _opt(info.get("description"), "model_info.description", _str)
        if info.get("alphabet") is not None:
            _word(info["alphabet"], "model_info.alphabet")
        for k in ("bos", "eos", "output", "reference"):
            _opt(info.get(k), f"model_info.{k}", _str, MAX_NAME)
        _opt(info.get("temperature"), "model_info.temperature", _str, 10_000)
        _opt(info.get("d"), "model_info.d", _int, 1)
        seen: set[int] = set()
        for i, e in enumerate(_list(info.get("layers", []), "model_info.layers")):
            p = f"model_info.layers[{i}]"
            _obj(e, p)
            _int(e.get("index"), f"{p}.index")
            if e["index"] in seen:
                _fail(f"{p}.index", f"layer {e['index']} appears twice")
            seen.add(e["index"])
            _opt(e.get("kind"), f"{p}.kind", _str, MAX_NAME)
            _opt(e.get("heads"), f"{p}.heads", _int, 1)
    settings = top.get("settings")
    if settings is not None:
        settings = _obj(settings, "settings")
        for k in ("min_n", "max_n"):
            _opt(settings.get(k), f"settings.{k}", _int, 1)
        _opt(settings.get("tau_override"), "settings.tau_override", _str, 10_000)
    verdict = top.get("verdict")
    if verdict is not None:
        verdict = _obj(verdict, "verdict")
        ok = verdict.get("ok")
        if ok is not None and not isinstance(ok, bool):
            _fail("verdict.ok", f"expected true, false or null, got {clip(repr(ok))}")
        _opt(verdict.get("status"), "verdict.status", _str, MAX_NAME)
        _opt(verdict.get("summary"), "verdict.summary", _str, 10_000)
    _opt(top.get("stopped"), "stopped", _str, MAX_NAME)  # "cluster lost" (absent: not stopped)
    cf = top.get("closed_forms")
    if cf is not None:
        _closed_forms(cf)
    lengths = top.get("lengths")
    if not isinstance(lengths, list) or not lengths:
        _fail("lengths", "a result needs a non-empty list of lengths (one entry per n)")
    ns: set[int] = set()
    for i, row in enumerate(lengths):
        _row(row, f"lengths[{i}]", ns)


MAX_RESULT_N = 10**9
"""Largest n a result file may hold (a check at n = 10^9 would need 10^18-entry score matrices)."""


def _row(row: Any, p: str, ns: set[int]) -> None:
    _obj(row, p)
    _int(row.get("n"), f"{p}.n", 1)
    if row["n"] > MAX_RESULT_N:
        _fail(f"{p}.n", f"n = {clip(str(row['n']))} is beyond the limit of {MAX_RESULT_N:,}")
    if row["n"] in ns:
        _fail(f"{p}.n", f"n = {row['n']} appears twice")
    ns.add(row["n"])
    if "inputs" in row:  # summed by the writers: null is not a count
        _int(row["inputs"], f"{p}.inputs")
    _opt(row.get("gamma"), f"{p}.gamma", _number, True)
    _opt(row.get("x_max"), f"{p}.x_max", _number, True)
    _opt(row.get("min_margin"), f"{p}.min_margin", _number, True)
    _opt(row.get("tau"), f"{p}.tau", _interval)
    for k in ("disagreements", "undecided", "reference_undefined", "accepted", "precision_bits"):
        _opt(row.get(k), f"{p}.{k}", _int)
    inv = row.get("invariant")
    if inv is not None and inv not in ("holds", "fails", "undecided"):
        _fail(f"{p}.invariant", f"expected holds, fails, undecided or null, got {clip(repr(inv))}")
    for k in ("first_disagreement", "first_undecided"):
        _opt(row.get(k), f"{p}.{k}", _word)
    gw = row.get("gamma_witness")
    if gw is not None:
        _obj(gw, f"{p}.gamma_witness")
        _opt(gw.get("input"), f"{p}.gamma_witness.input", _word)
        for k in ("layer", "head", "query", "top_key", "other_key"):
            _opt(gw.get(k), f"{p}.gamma_witness.{k}", _int)
    rm = row.get("reference_mismatches")
    if rm is not None:
        _obj(rm, f"{p}.reference_mismatches")
        _int(rm.get("hard"), f"{p}.reference_mismatches.hard")
        _opt(rm.get("soft"), f"{p}.reference_mismatches.soft", _int)
    for j, e in enumerate(_list(row.get("layers", []), f"{p}.layers")):
        lp = f"{p}.layers[{j}]"
        _obj(e, lp)
        _int(e.get("index"), f"{lp}.index")
        _opt(e.get("kind"), f"{lp}.kind", _str, MAX_NAME)
        _opt(e.get("activation_max"), f"{lp}.activation_max", _number, True)
        _opt(e.get("error"), f"{lp}.error", _interval)
        ew = e.get("error_witness")
        if ew is not None:
            _obj(ew, f"{lp}.error_witness")
            _opt(ew.get("input"), f"{lp}.error_witness.input", _word)
            _opt(ew.get("position"), f"{lp}.error_witness.position", _int)
        for h, head in enumerate(_list(e.get("heads", []), f"{lp}.heads")):
            hp = f"{lp}.heads[{h}]"
            _obj(head, hp)
            _opt(head.get("index"), f"{hp}.index", _int)
            _opt(head.get("gamma"), f"{hp}.gamma", _number, True)
            _opt(head.get("tau"), f"{hp}.tau", _interval)
    b = row.get("bounds")
    if b is not None:
        _obj(b, f"{p}.bounds")
        for j, e in enumerate(_list(b.get("layers", []), f"{p}.bounds.layers")):
            bp = f"{p}.bounds.layers[{j}]"
            _obj(e, bp)
            _int(e.get("index"), f"{bp}.index")
            _opt(e.get("bound"), f"{bp}.bound", _number, True, True)
            _opt(e.get("measured_over_bound"), f"{bp}.measured_over_bound", _number, True, True)
        _opt(b.get("tau_theorem"), f"{p}.bounds.tau_theorem", _interval)
        _opt(b.get("violations"), f"{p}.bounds.violations", _int)
    ts = row.get("tau_star")
    if ts is not None:
        if isinstance(ts, dict) and ("decisions" in ts or "invariant" in ts):
            for side in ("decisions", "invariant"):  # the split shape (τ*_dec, τ*_inv)
                if ts.get(side) is not None:
                    sp = f"{p}.tau_star.{side}"
                    _interval(ts[side], sp, nullable_ends=True, rational=True)
                    for k, f in enumerate(_list(ts[side].get("non_monotone") or [], sp)):
                        fp = f"{sp}.non_monotone[{k}]"
                        _obj(f, fp)
                        _opt(f.get("found"), f"{fp}.found", _str, MAX_NAME)
                        _opt(f.get("reason"), f"{fp}.reason", _str, MAX_NAME)
                        _opt(f.get("input"), f"{fp}.input", _word)
                        _opt(f.get("layer"), f"{fp}.layer", _int)
                        _opt(f.get("tau"), f"{fp}.tau", _number, True)
                    w = ts[side].get("upper_witness")
                    if w is not None:
                        _obj(w, f"{sp}.upper_witness")
                        _opt(w.get("input"), f"{sp}.upper_witness.input", _word)
        else:  # the older single bracket
            _interval(ts, f"{p}.tau_star", nullable_ends=True, rational=True)
        _opt(ts.get("grid"), f"{p}.tau_star.grid", _str, MAX_NAME)
        _opt(ts.get("probes"), f"{p}.tau_star.probes", _int)


# ---------------------------------------------------------------------------------------------
# closed_forms: every field the reports print or evaluate (issue 27: keys and values reached
# LaTeX and Markdown raw; `a` = 1e9999999 expanded a 10-million-digit power)

#: Lengths at which a structured form may be evaluated (a hypergeometric form loops to n and a
#: power form raises its base to n; no exhaustive check gets near this).
MAX_FORM_N = 5_000
#: Entries of one list of lengths in a closed-form record.
MAX_LENGTH_LIST = 10_000
#: Characters of one rational coefficient of a structured form, and of a bracket's exponent.
MAX_COEFF_TEXT = 200
#: ... of a rational or power form's polynomials: as long as an exact value check writes (a
#: model with weights near 1e300 has γ(n) and x_max(n) constants of 301+ digits, one with a
#: 1/(3…3) weight a γ(n) of 4,600; the reports abbreviate long digit runs).
MAX_POLY_COEFF_TEXT = MAX_NUMBER_TEXT
MAX_EXPONENT_TEXT = 40
#: Digits a report may build evaluating one closed form at every length it names (summed over
#: the lengths; see _form_digits). Evaluation costs about 0.05 s per 100,000 such digits of
#: many distinct coefficients (a 200,000-character form: 0.24 s per length), so a hostile
#: form stays a few seconds; a form check wrote (a 4,600-digit γ at 4 lengths: 18,400) is far
#: below it.
MAX_FORM_WORK = 5_000_000
#: Coefficients of one polynomial of a form (the fits use degree ≤ 4).
MAX_COEFFS = 8
#: Characters of a closed form's ``expression``: the text of its coefficients (numerator and
#: denominator polynomials, each coefficient at most MAX_POLY_COEFF_TEXT) and a little syntax.
MAX_EXPRESSION_TEXT = 2 * MAX_COEFFS * (MAX_POLY_COEFF_TEXT + 16)
# a bracket constant: short plain decimal, exponent of at most 6 digits (what decimal_down writes)
_CONST = re.compile(r"-?[0-9]{1,60}(?:\.[0-9]{1,60})?(?:[eE][+-]?[0-9]{1,6})?")
_FORM_KINDS = ("rational", "power", "hypergeometric", "parity")


def _rat(x: Any, path: str, limit: int) -> None:
    """An exact rational written ``p`` or ``p/q`` (q > 0), at most ``limit`` characters."""
    if not isinstance(x, str) or len(x) > limit or not _RAT.fullmatch(x):
        _fail(path, f"expected a rational 'p/q' of at most {limit} characters, got {clip(repr(x))}")
    if "/" in x and int(x.split("/")[1]) == 0:
        _fail(path, f"{clip(x)!r} divides by zero")


def _lengths(x: Any, path: str, limit: int = MAX_RESULT_N) -> None:
    items = _list(x, path)
    if len(items) > MAX_LENGTH_LIST:
        _fail(path, f"{len(items):,} lengths (limit {MAX_LENGTH_LIST:,})")
    for i, n in enumerate(items):
        _int(n, f"{path}[{i}]", 1)
        if n > limit:
            _fail(f"{path}[{i}]", f"n = {clip(str(n))} is beyond the limit of {limit:,}")


def _form(x: Any, path: str, top: bool = True) -> None:
    f = _obj(x, path)
    kind = f.get("kind")
    if kind not in _FORM_KINDS or (kind == "parity" and not top):
        _fail(f"{path}.kind", f"expected one of {', '.join(_FORM_KINDS)}, got {clip(repr(kind))}")
    if kind == "parity":
        for half in ("even", "odd"):
            _opt(f.get(half), f"{path}.{half}", _form, False)
        return
    # a polynomial's coefficients are used once per n, so they may be longer (check writes
    # γ(n) = 10^300 as a 301-digit constant); a hypergeometric form's are multiplied up to n
    # times, so they stay short, like a power form's base
    limit = MAX_COEFF_TEXT if kind == "hypergeometric" else MAX_POLY_COEFF_TEXT
    for part in ("num", "den"):
        coeffs = _list(f.get(part), f"{path}.{part}")
        if not 1 <= len(coeffs) <= MAX_COEFFS:
            _fail(f"{path}.{part}", f"expected 1 to {MAX_COEFFS} coefficients, got {len(coeffs)}")
        for i, c in enumerate(coeffs):
            _rat(c, f"{path}.{part}[{i}]", limit)
    # a power form's base is raised to n once per length: its cost is bounded by MAX_FORM_WORK
    # (check writes a 212-digit base for γ(n) = (7^250)^n)
    _opt(f.get("base"), f"{path}.base", _rat, MAX_NUMBER_TEXT)
    if kind == "hypergeometric":
        _int(f.get("start"), f"{path}.start", 0)
        if f["start"] > MAX_FORM_N:
            _fail(f"{path}.start", f"beyond the limit of {MAX_FORM_N:,}")
        step = f.get("step")
        if step not in (1, 2) or isinstance(step, bool):
            _fail(f"{path}.step", f"expected 1 or 2, got {clip(repr(step))}")
        _rat(f.get("value"), f"{path}.value", MAX_NUMBER_TEXT)


def _form_digits(f: dict[str, Any], n: int) -> int:
    """About how many digits evaluating a (validated) form at n builds: its coefficients, a
    power form's base n times, a hypergeometric form's coefficients once per step."""
    if f["kind"] == "parity":
        half = f.get("even" if n % 2 == 0 else "odd")
        return 0 if half is None else _form_digits(half, n)
    poly = sum(len(c) for c in (*f["num"], *f["den"]))
    if f["kind"] == "hypergeometric":
        return len(f["value"]) + poly * max(0, n - f["start"]) // f["step"]
    return poly + len(f.get("base") or "") * n


def closed_form_problem(record: dict[str, Any]) -> str | None:
    """Why :func:`validate_result` would refuse the *form* of this closed-form record (its
    expression, coefficients and evaluation work), else None.

    The fitter asks before it keeps a form, so ``check`` never writes a form that ``report``
    then refuses (a hypergeometric form with a 254-digit coefficient did). The lengths
    themselves are not asked about: they are the data's, the same in a record without a form."""
    try:
        _opt(record.get("expression"), "expression", _str, MAX_EXPRESSION_TEXT)
        form = record.get("form")
        if form is not None:
            _form(form, "form")
            _form_work(form, [*record.get("fitted_on", ()), *record.get("verified_on", ())], "form")
    except ModelError as e:
        return e.message
    return None


def _form_work(form: dict[str, Any], ns: list[int], path: str) -> None:
    """Evaluating a (validated) form at the lengths it names stays within MAX_FORM_WORK."""
    work = sum(_form_digits(form, n) for n in ns)
    if work > MAX_FORM_WORK:
        _fail(
            path,
            f"evaluating the form at its {len(ns):,} lengths builds about {work:,} "
            f"digits (limit {MAX_FORM_WORK:,})",
        )


def _closed_forms(x: Any) -> None:
    """Keys are any short strings (the writers escape them); records are checked field by field."""
    cf = _obj(x, "closed_forms")
    for key, rec in cf.items():
        if len(key) > MAX_NAME:
            _fail("closed_forms", f"a key of {len(key):,} characters (limit {MAX_NAME})")
        p = f"closed_forms.{clip(key, 60)}"
        _obj(rec, p)
        kind = rec.get("kind")
        if kind not in (None, "bracket"):
            _fail(f"{p}.kind", f"expected 'bracket' or no kind, got {clip(repr(kind))}")
        _opt(rec.get("reason"), f"{p}.reason", _str, 1_000)
        for k in ("exactly_zero_at", "open_at", "lengths", "undefined_at", "exceptions"):
            _opt(rec.get(k), f"{p}.{k}", _lengths)
        _opt(rec.get("valid_from"), f"{p}.valid_from", _int, 1)
        if kind == "bracket":
            _opt(rec.get("shape"), f"{p}.shape", _str, MAX_NAME)
            if rec.get("shape") is None:
                continue
            for k in ("a", "b"):
                _rat(rec.get(k), f"{p}.{k}", MAX_EXPONENT_TEXT)
            for k in ("c_lower", "c_upper"):
                c = rec.get(k)
                if not isinstance(c, str) or not _CONST.fullmatch(c):
                    _fail(
                        f"{p}.{k}",
                        f"expected a decimal like '0.0682' or '2.4e-57', got {clip(repr(c))}",
                    )
            _lengths(rec.get("on"), f"{p}.on")
            continue
        _opt(rec.get("expression"), f"{p}.expression", _str, MAX_EXPRESSION_TEXT)
        if rec.get("valid_from") is not None and rec.get("exceptions") is None:
            _fail(f"{p}.exceptions", "valid_from needs the list of exceptions")
        form = rec.get("form")
        if form is not None:
            _form(form, f"{p}.form")
        # a form is evaluated at the lengths it names: keep them where that is cheap
        limit = MAX_FORM_N if form is not None else MAX_RESULT_N
        for k in ("fitted_on", "verified_on"):
            if rec.get("expression") is not None and rec.get(k) is None:
                _fail(f"{p}.{k}", "a closed form needs the lengths it was fitted and verified on")
            _opt(rec.get(k), f"{p}.{k}", _lengths, limit)
        if form is not None:
            ns = [*(rec.get("fitted_on") or []), *(rec.get("verified_on") or [])]
            _form_work(form, ns, f"{p}.form")


# ---------------------------------------------------------------------------------------------
# exactattn-certificate/1 (issue 40: `report` printed its fields raw — `<img onerror>` reached
# the Markdown, `\input{/etc/passwd}` the LaTeX — and a number where text belongs was exit 4)

#: Largest length a certificate names (``certify --n``, ``--range`` ends).
MAX_CERT_N = 10**12
#: Longest free text of a certificate (a reason, a proof step's statement: claim expressions
#: of up to 10,000 characters appear in them).
MAX_CERT_TEXT = 20_000
_CERT_FIX = "regenerate the file with `exactattn certify --json` (docs/limits.md)"
_GRID = re.compile(r"2\^\(k/([1-9][0-9]{0,3})\)")


def _text(x: Any, path: str) -> None:
    _str(x, path, MAX_CERT_TEXT)


def _num(x: Any, path: str) -> None:
    """A written certified or exact value: a decimal, ``p/q`` or ``inf``."""
    _number(x, path, True, True)


def _cert_verdict(d: dict[str, Any], path: str) -> None:
    _int(d.get("n"), f"{path}n", 1, MAX_CERT_N)
    if d.get("status") not in ("certified", "not certified"):
        _fail(
            f"{path}status",
            f"expected 'certified' or 'not certified', got {clip(repr(d.get('status')))}",
        )
    _text(d.get("reason"), f"{path}reason")
    _opt(d.get("certified_by"), f"{path}certified_by", _text)


def _sharp_chain(x: Any, path: str) -> None:
    """Theorem S's record at n (``SharpChain``; issue 35 added it after this validation)."""
    if x is None:
        return
    _obj(x, path)
    _num(x.get("readout_bound"), f"{path}.readout_bound")
    _num(x.get("tail_only"), f"{path}.tail_only")
    _str(x.get("dominant"), f"{path}.dominant", MAX_NAME)
    for i, e in enumerate(_list(x.get("layers"), f"{path}.layers")):
        _num(e, f"{path}.layers[{i}]")
    for i, h in enumerate(_list(x.get("heads"), f"{path}.heads")):
        p = f"{path}.heads[{i}]"
        _obj(h, p)
        _int(h.get("layer"), f"{p}.layer")
        _int(h.get("head"), f"{p}.head")
        _str(h.get("option"), f"{p}.option", MAX_NAME)
        _num(h.get("sigma"), f"{p}.sigma")
        _num(h.get("tau"), f"{p}.tau")
        _need(h, ("tail", "gap", "factor"), f"{p}.")
        for k in ("tail", "gap", "factor"):
            _opt(h[k], f"{p}.{k}", _num)


def _enumerated(x: Any, path: str) -> None:
    """Which lengths a stored exhaustive check certified (``EnumeratedLengths``, issue 35)."""
    if x is None:
        return
    _obj(x, path)
    _need(x, ("file", "not_used"), f"{path}.")
    _opt(x["file"], f"{path}.file", _str, 10_000)
    _opt(x["not_used"], f"{path}.not_used", _text)
    for i, n in enumerate(_list(x.get("lengths"), f"{path}.lengths")):
        _int(n, f"{path}.lengths[{i}]", 1, MAX_CERT_N)


def _proof(top: dict[str, Any]) -> None:
    for i, s in enumerate(_list(top.get("proof_chain"), "proof_chain")):
        p = f"proof_chain[{i}]"
        _obj(s, p)
        _str(s.get("step"), f"{p}.step", MAX_NAME)
        _text(s.get("statement"), f"{p}.statement")
        _str(s.get("proved_in"), f"{p}.proved_in", 1_000)
    for i, k in enumerate(_list(top.get("conditional_on"), "conditional_on")):
        _str(k, f"conditional_on[{i}]", MAX_NAME)
    _obj(top.get("claims"), "claims")  # the model's claims object, not rendered
    pv = top.get("provenance")  # absent in files written before issue 41
    if pv is not None:
        pv = _obj(pv, "provenance")
        _str(pv.get("model_sha256"), "provenance.model_sha256", 64)
        _bool(pv.get("rederived"), "provenance.rederived")
        _need(pv, ("built_by", "reason"), "provenance.")
        _opt(pv["built_by"], "provenance.built_by", _str, MAX_NAME)
        _opt(pv["reason"], "provenance.reason", _text)
    _opt(top.get("checked_not_used"), "checked_not_used", _text)


def _grid_point(x: Any, path: str) -> None:
    if x is None:
        return
    _obj(x, path)
    _int(x.get("k"), f"{path}.k", None)
    _interval(x.get("tau"), f"{path}.tau", rational=True)
    _opt(x.get("reason"), f"{path}.reason", _text)


def _length_certificate(top: dict[str, Any]) -> None:
    _cert_verdict(top, "")
    _need(top, ("model_path", "checked_by_enumeration_to", "tau_grid", "tau_exact"))
    _need(_obj(top.get("claims_at_n"), "claims_at_n"), ("margin_lower",), "claims_at_n.")
    g = top.get("tau_grid")
    if g is not None:
        _obj(g, "tau_grid")
        if not isinstance(g.get("grid"), str) or not _GRID.fullmatch(g["grid"]):
            _fail(
                "tau_grid.grid",
                f"expected '2^(k/S)' with 1 <= S <= 9999, got {clip(repr(g.get('grid')))}",
            )
        _need(g, ("last_certified", "first_not_certified"), "tau_grid.")
        for k in ("last_certified", "first_not_certified"):
            _grid_point(g[k], f"tau_grid.{k}")
    _text(top.get("tau"), "tau")
    _opt(top.get("tau_exact"), "tau_exact", _text)
    for i, row in enumerate(_list(top.get("tau_values"), "tau_values")):
        if row is not None:
            for h, t in enumerate(_list(row, f"tau_values[{i}]")):
                _interval(t, f"tau_values[{i}][{h}]", rational=True)
    c = _obj(top.get("claims_at_n"), "claims_at_n")
    _num(c.get("gamma_lower"), "claims_at_n.gamma_lower")
    _num(c.get("x_max_upper"), "claims_at_n.x_max_upper")
    _opt(c.get("margin_lower"), "claims_at_n.margin_lower", _num)
    k = _obj(top.get("constants"), "constants")
    for name in ("L", "T", "m"):
        _int(k.get(name), f"constants.{name}")
    for name in ("K", "X", "readout_lipschitz", "eps_star"):
        _num(k.get(name), f"constants.{name}")
    for i, x in enumerate(_list(k.get("layer_input_bounds"), "constants.layer_input_bounds")):
        _num(x, f"constants.layer_input_bounds[{i}]")
    for i, e in enumerate(_list(top.get("layers"), "layers")):
        p = f"layers[{i}]"
        _obj(e, p)
        _int(e.get("index"), f"{p}.index")
        _str(e.get("kind"), f"{p}.kind", MAX_NAME)
        _num(e.get("error_bound"), f"{p}.error_bound")
    e = _obj(top.get("eps_le_1"), "eps_le_1")
    _bool(
        e.get("certified_after_every_feeding_layer"), "eps_le_1.certified_after_every_feeding_layer"
    )
    _need(e, ("theorem_4ii_invariant",), "eps_le_1.")
    _bool(e.get("theorem_4ii_invariant"), "eps_le_1.theorem_4ii_invariant", True)
    pc = _obj(top.get("paper_chain"), "paper_chain")
    _bool(pc.get("applies"), "paper_chain.applies")
    if pc["applies"]:
        _need(pc, ("invariant_B_L_minus_1_le_1",), "paper_chain.")
        _num(pc.get("a"), "paper_chain.a")
        _num(pc.get("b"), "paper_chain.b")
        for i, x in enumerate(_list(pc.get("layers"), "paper_chain.layers")):
            _num(x, f"paper_chain.layers[{i}]")
        _bool(pc.get("invariant_B_L_minus_1_le_1"), "paper_chain.invariant_B_L_minus_1_le_1", True)
    else:
        _need(pc, ("why",), "paper_chain.")
        _opt(pc.get("why"), "paper_chain.why", _text)
    _num(top.get("final_error_bound"), "final_error_bound")
    _interval(top.get("tau_theorem"), "tau_theorem", rational=True)
    _num(top.get("tau_theorem_lower"), "tau_theorem_lower")
    _sharp_chain(top.get("sharp_chain"), "sharp_chain")


def _need(d: dict[str, Any], keys: tuple[str, ...], path: str = "") -> None:
    """Keys the record reads even when their value may be null."""
    for k in keys:
        if k not in d:
            _fail(f"{path}{k}", "missing (write null when there is none)")


def _bool(x: Any, path: str, nullable: bool = False) -> None:
    if not isinstance(x, bool) and not (nullable and x is None):
        want = "true, false or null" if nullable else "true or false"
        _fail(path, f"expected {want}, got {clip(repr(x))}")


def _range_certificate(top: dict[str, Any]) -> None:
    r = _list(top.get("range"), "range")
    if len(r) != 2:
        _fail("range", f"expected [A, B], got {len(r)} entries")
    _int(r[0], "range[0]", 1, MAX_CERT_N)
    _int(r[1], "range[1]", r[0], MAX_CERT_N)
    _text(top.get("tau"), "tau")
    _need(top, ("first_failure",))
    _int(top.get("evaluated"), "evaluated", 0, r[1] - r[0] + 1)
    f = top.get("first_failure")
    if f is not None:
        _cert_verdict(_obj(f, "first_failure"), "first_failure.")
        if not r[0] <= f["n"] <= r[1]:
            _fail("first_failure.n", f"n = {f['n']} is outside the range {r[0]}..{r[1]}")
    _int(top.get("certified_through"), "certified_through", 0, MAX_CERT_N)
    if "seconds" in top:  # the run's record: time taken, where the claims were checked
        _need(top, ("checked_by_enumeration_to", "checked_in"))
        s = top["seconds"]
        if not (isinstance(s, int) and not isinstance(s, bool)):
            _number(s, "seconds", False)
        _opt(top.get("checked_by_enumeration_to"), "checked_by_enumeration_to", _int, 1)
        _opt(top.get("checked_in"), "checked_in", _str, 10_000)
    _enumerated(top.get("certified_by_enumeration"), "certified_by_enumeration")


def validate_certificate(data: Any, source: str = "certificate") -> None:
    """Raise :class:`ModelError` (exit 2) naming the first malformed field of an
    ``exactattn-certificate/1`` file: every field its record (``results/certificate.py``)
    reads and ``report`` prints has its type and shape checked, so a hand-edited file ends
    in one message naming the JSON path, never in a traceback."""
    try:
        top = _obj(data, source)
        _str(top.get("model"), "model", MAX_NAME)
        _proof(top)
        if "range" in top:
            _range_certificate(top)
            return
        _opt(top.get("model_path"), "model_path", _str, 10_000)
        _opt(top.get("checked_by_enumeration_to"), "checked_by_enumeration_to", _int, 1)
        _opt(top.get("checked_in"), "checked_in", _str, 10_000)
        _length_certificate(top)
    except ModelError as e:
        raise ModelError(e.path, e.message, _CERT_FIX) from None


# ---------------------------------------------------------------------------------------------
# exactattn-precision/1 and exactattn-search/1 (``report`` renders them too; issue 40)

_PRECISION_FIX = "regenerate the file with `exactattn precision --json` (docs/limits.md)"
_SEARCH_FIX = "regenerate the file with `exactattn search --json` (docs/limits.md)"
_MODES = ("family", "inputs", "enumerate")
_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: Most lengths of one precision run (``--n-pow2 0:24`` gives 25; enumerations up to 10^6
#: inputs have fewer lengths than that).
MAX_RUN_LENGTHS = 10_000


def _enc(x: Any, path: str) -> None:
    """An error enclosure ``{lower, upper}`` (decimals or ``inf``), or null."""
    if x is not None:
        _interval(x, path)


def _diagnosis(d: Any, path: str) -> None:
    _obj(d, path)
    _int(d.get("layer"), f"{path}.layer")
    for k in ("head", "query", "key", "top_key"):
        _opt(d.get(k), f"{path}.{k}", _int)
    _opt(d.get("exact_gap"), f"{path}.exact_gap", _rat, MAX_NUMBER_TEXT)
    _str(d.get("detail"), f"{path}.detail", 1_000)
    errors = d.get("layer_errors")
    if errors is not None:
        for i, e in enumerate(_list(errors, f"{path}.layer_errors")):
            if not (isinstance(e, int) and not isinstance(e, bool)) and not (
                isinstance(e, str) and e in ("Infinity", "-Infinity", "NaN")
            ):
                _number(e, f"{path}.layer_errors[{i}]", False)


def _first_flip(f: Any, path: str) -> None:
    _obj(f, path)
    _word(f.get("input"), f"{path}.input")
    _need(f, ("family", "hard", "dtype_output", "replayed"), f"{path}.")
    _opt(f.get("family"), f"{path}.family", _str, MAX_NAME)
    _str(f.get("cause"), f"{path}.cause", MAX_NAME)
    _diagnosis(f.get("diagnosis"), f"{path}.diagnosis")
    _bool(f.get("replayed"), f"{path}.replayed")


def _precision_length(e: Any, path: str, ns: set[int]) -> None:
    _obj(e, path)
    _int(e.get("n"), f"{path}.n", 1, MAX_RESULT_N)
    if e["n"] in ns:
        _fail(f"{path}.n", f"n = {e['n']} appears twice")
    ns.add(e["n"])
    _int(e.get("inputs"), f"{path}.inputs")
    _int(e.get("flips"), f"{path}.flips", 0, e["inputs"])
    _need(
        e,
        ("first_flip", "rounding_error", "softmax_error", "total_error", "readout_error"),
        f"{path}.",
    )
    if e["first_flip"] is not None:
        _first_flip(e["first_flip"], f"{path}.first_flip")
    for k in ("rounding_error", "softmax_error", "total_error", "readout_error"):
        _enc(e[k], f"{path}.{k}")
    soft = e.get("soft")
    if soft is not None:
        _obj(soft, f"{path}.soft")
        for k in ("decided", "undecided", "differs_from_hard"):
            _int(soft.get(k), f"{path}.soft.{k}")


def validate_precision(data: Any, source: str = "precision") -> None:
    """Raise :class:`ModelError` (exit 2) naming the first malformed field of an
    ``exactattn-precision/1`` file: every field its record (``results/precision.py``) reads
    and ``report`` prints, and the documented rules for files older than a key (LEGACY)."""
    # lazy: results/precision imports numpy; only this file format needs it
    from exactattn.results.precision import legacy_keys

    try:
        top = _obj(data, source)
        _str(top.get("model"), "model", MAX_NAME)
        _opt(top.get("model_sha256"), "model_sha256", _str, 64)
        s = _obj(top.get("settings"), "settings")
        for k in ("dtypes", "taus"):
            for i, x in enumerate(_list(s.get(k), f"settings.{k}")):
                _str(x, f"settings.{k}[{i}]", 10_000)
        _int(s.get("seed"), "settings.seed", None)
        if s.get("mode") not in _MODES:
            _fail(
                "settings.mode",
                f"expected one of {', '.join(_MODES)}, got {clip(repr(s.get('mode')))}",
            )
        if "backend" in s:  # both or neither (LEGACY: files before issue 26 have neither)
            _need(s, ("backend_version",), "settings.")
            _str(s["backend"], "settings.backend", MAX_NAME)
        _opt(s.get("backend_version"), "settings.backend_version", _str, MAX_NAME)
        _opt(s.get("certified"), "settings.certified", _bool)
        for i, x in enumerate(_list(s.get("families", []), "settings.families")):
            _str(x, f"settings.families[{i}]", MAX_NAME)
        _lengths(s.get("ns", []), "settings.ns")
        for k in ("min_n", "max_n"):
            _opt(s.get(k), f"settings.{k}", _int, 1, MAX_RESULT_N)
        if "interrupted" in top:
            _bool(top["interrupted"], "interrupted")
        runs = _list(top.get("runs"), "runs")
        if not runs:
            _fail("runs", "a precision result needs a non-empty list of runs (dtype, τ)")
        for r, run in enumerate(runs):
            p = f"runs[{r}]"
            _obj(run, p)
            if run.get("dtype") not in _DTYPES:
                _fail(
                    f"{p}.dtype",
                    f"expected one of {', '.join(_DTYPES)}, got {clip(repr(run.get('dtype')))}",
                )
            _str(run.get("tau"), f"{p}.tau", 10_000)
            _need(run, ("first_flip_n",), f"{p}.")
            _opt(run["first_flip_n"], f"{p}.first_flip_n", _int, 1, MAX_RESULT_N)
            lengths = _list(run.get("lengths"), f"{p}.lengths")
            if len(lengths) > MAX_RUN_LENGTHS:
                _fail(f"{p}.lengths", f"{len(lengths):,} lengths (limit {MAX_RUN_LENGTHS:,})")
            ns: set[int] = set()
            for k, e in enumerate(lengths):
                _precision_length(e, f"{p}.lengths[{k}]", ns)
        try:
            legacy_keys(top)  # a key missing in a way no earlier writer left it
        except (ValueError, KeyError, TypeError) as exc:
            _fail("settings", f"an inconsistent file: {clip(str(exc), 200)}")
    except ModelError as e:
        raise ModelError(e.path, e.message, _PRECISION_FIX) from None


_OBJECTIVES = ("margin", "gamma", "error")


def validate_search(data: Any, source: str = "search") -> None:
    """Raise :class:`ModelError` (exit 2) naming the first malformed field of an
    ``exactattn-search/1`` file (every field ``results/search.py`` reads and ``report``
    prints)."""
    try:
        top = _obj(data, source)
        _str(top.get("model"), "model", MAX_NAME)
        _opt(top.get("model_sha256"), "model_sha256", _str, 64)
        _int(top.get("n"), "n", 1, MAX_RESULT_N)
        if top.get("objective") not in _OBJECTIVES:
            _fail(
                "objective",
                f"expected one of {', '.join(_OBJECTIVES)}, got {clip(repr(top.get('objective')))}",
            )
        _int(top.get("evaluated"), "evaluated")
        _int(top.get("seed"), "seed", None)
        _int(top.get("budget"), "budget")
        _opt(top.get("meaning"), "meaning", _str, 1_000)
        w = _obj(top.get("witness"), "witness")
        _word(w.get("input"), "witness.input")
        if len(w["input"]) != top["n"]:
            _fail("witness.input", f"{len(w['input']):,} symbols, but n = {top['n']:,}")
        v = _obj(w.get("value"), "witness.value")
        _interval(v, "witness.value", rational=True)
        _need(w, ("layer", "position"), "witness.")
        _opt(w["layer"], "witness.layer", _int)
        _opt(w["position"], "witness.position", _int)
        _opt(w.get("decision"), "witness.decision", _bool, True)
        for k in ("head", "prec"):
            _opt(w.get(k), f"witness.{k}", _int)
        _opt(w.get("method"), "witness.method", _str, MAX_NAME)
    except ModelError as e:
        raise ModelError(e.path, e.message, _SEARCH_FIX) from None
