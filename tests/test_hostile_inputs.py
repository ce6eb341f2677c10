"""Every hostile command line of ``tests/support/hostile_cases.py`` through the real CLI.

A case passes with exit 0 and valid JSON (no NaN or Infinity, packets conserved) or with
exit 2 and one ``rxlab: error:`` line, as the case expects; a segfault, a hang past the
timeout, a memory blowup past the address-space limit or a traceback fails it. The cases
run in child processes, two at a time, once per session (the selected ones only).
"""

from __future__ import annotations

import pytest
from support import hostile_cases as H

_results: dict = {}


@pytest.fixture(scope="module")
def results(request):
    chosen = [item.callspec.params["case"] for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec")]
    _results.update(H.run_all(chosen))
    return _results


@pytest.mark.parametrize("case", H.CASES, ids=[c.id for c in H.CASES])
def test_case(case, results):
    verdict, detail, _ = results[case.id]
    assert verdict != "FAIL", f"{H.argv_text(case)}: {detail}"
    assert case.expect in (verdict, "either"), detail


def test_summary(results, capsys):
    """The count, printed into the test log (CI's output)."""
    failed = sorted(k for k, v in results.items() if v[0] == "FAIL")
    with capsys.disabled():
        print(f"\nhostile inputs: {len(results)} cases through the CLI, "
              f"{len(results) - len(failed)} held, {len(failed)} failed"
              + (f" ({', '.join(failed)})" if failed else ""))
