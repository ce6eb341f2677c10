"""``rxlab compare``: configurations over the same traffic seeds, side by side.

``stats`` holds the intervals (per configuration and for differences), ``runner`` the
configurations and their runs on local processes, ``table`` the terminal and JSON views,
``render`` the PNG and the HTML page.
"""
