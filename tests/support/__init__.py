"""Helpers the tests share: kernel reference implementations (``rfs_reference``,
``queueing_reference``), harnesses that build scenarios and states (``rfs_harness``),
compiled entry points to single mechanisms (``compiled_calls``), the hostile-input table
(``hostile_cases``, also read by ``scripts/boundscheck.py`` and ``scripts/reliability.py``)
and small assertions (``one_line``, ``plan_output``, ``lab_processes``)."""
