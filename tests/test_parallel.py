"""The one process pool (rxlab.parallel): every command's parallel runs go through it."""

import math
import operator
import re
from pathlib import Path

import pytest

from rxlab.parallel import RunError, run_each, run_local

RXLAB = Path(__file__).resolve().parents[1] / "rxlab"


def test_each_task_comes_back_once_under_its_id():
    got = {}
    breaks = run_local(operator.neg, [(f"t{i}", i) for i in range(7)], 2, got.__setitem__)
    assert got == {f"t{i}": -i for i in range(7)} and breaks == 0


def test_a_task_that_raises_is_named_with_its_error():
    with pytest.raises(RunError) as e:
        run_local(math.sqrt, [("ok", 4.0), ("bad", -1.0)], 2, lambda *_: None)
    assert e.value.run_id == "bad" and isinstance(e.value.error, ValueError)


def test_run_each_raises_the_task_s_own_error():
    with pytest.raises(ValueError):
        run_each(math.sqrt, [("bad", -1.0)], 2, lambda *_: None)


def test_no_other_module_starts_a_process_pool():
    """run --seeds, compare, reproduce, tune and sweep share rxlab.parallel's pool."""
    pool = re.compile(r"ProcessPoolExecutor|\b(multiprocessing|mp)\.(Pool|get_context)\(")
    others = [str(p.relative_to(RXLAB)) for p in RXLAB.rglob("*.py")
              if p.name != "parallel.py" and pool.search(p.read_text())]
    assert others == []
