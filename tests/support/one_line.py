"""The one-line-error checks every test uses: bad input is one line naming the field.

``usage_error`` for the Python API (a ``UsageError`` whose text is one line), ``cli_error``
for the command line (stderr is one ``rxlab: ...`` line, no traceback).
"""

from __future__ import annotations

import pytest

from rxlab.errors import UsageError


def usage_error(fn, *needles: str) -> str:
    """``fn()`` raises a one-line UsageError holding every needle; returns its text."""
    with pytest.raises(UsageError) as ei:
        fn()
    msg = str(ei.value)
    assert msg and "\n" not in msg, msg
    for n in needles:
        assert n in msg, (n, msg)
    return msg


def cli_error(err: str, *needles: str) -> str:
    """``err`` (a command's stderr) is one ``rxlab:`` line holding every needle."""
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("rxlab: "), err
    assert "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], (n, err)
    return lines[0]
