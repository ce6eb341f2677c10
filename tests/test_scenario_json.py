"""A scenario written by ``json.dumps`` is read by the json module (fast), and must give
exactly what PyYAML gives for the same text: values, types, key order and each number's
text; any text where they could differ must go to PyYAML."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from rxlab import inputs
from rxlab import scenario as S

ODD = ["true", "null", "yes", "on", "1e3", "0x10", "1_000", "2001-12-14", "<<", "~", "",
       ".inf", "a: b", "# c", "\t", "\n", "\x7f", "\x85", "\u2028", "\ufeff", "\U0001F600",
       "\\", "/", "\"", "'", "é", "x" * 1100]
NUMBERS = [0, -1, 10**20, 10**300, 0.1, -0.0, 1e-05, 1e16, 1e300, 1000.0, 2.5e-300,
           float("inf"), float("nan")]


def _value(rnd: random.Random, depth: int = 0):
    r = rnd.random()
    if depth < 4 and r < 0.25:
        return {rnd.choice(ODD): _value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}
    if depth < 4 and r < 0.4:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    if r < 0.7:
        return rnd.choice(NUMBERS)
    return rnd.choice(ODD + [True, False, None])


def _yaml(text: str):
    return yaml.load(text, Loader=inputs._Loader)  # noqa: S506 (a SafeLoader subclass)


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if getattr(a, "yaml_text", None) != getattr(b, "yaml_text", None):
        return False
    return a == b or (a != a and b != b)


def test_default_scenario_as_json_reads_as_yaml_does():
    text = json.dumps(inputs.load_yaml(S.BUILTIN_DIR / "default.yaml"))
    assert _same(inputs._plain_json(text), _yaml(text))


@pytest.mark.parametrize("seed", range(4))
def test_json_reader_agrees_with_pyyaml(seed):
    rnd = random.Random(seed)
    fast = 0
    for _ in range(300):
        data = {"k": _value(rnd)}
        text = json.dumps(data, indent=rnd.choice([None, 2, 4]), ensure_ascii=rnd.random() < .7)
        try:
            got = inputs._plain_json(text)
        except inputs._NotPlain:
            continue  # PyYAML reads it (or refuses it)
        fast += 1
        assert _same(got, _yaml(text)), text[:200]
    assert fast > 50  # the fast path is taken, so the comparison tests something


def test_a_key_given_twice_is_still_yamls_error():
    with pytest.raises(S.UsageError, match="given twice"):
        inputs.parse_yaml('{"a": 1, "a": 2}', "s.json")


def test_an_integer_too_long_for_python_is_still_yamls_error():
    with pytest.raises(S.UsageError, match="5,000 characters"):
        inputs.parse_yaml('{"a": ' + "9" * 5000 + "}", "s.json")
