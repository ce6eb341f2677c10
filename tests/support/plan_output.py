"""The steps ``rxlab host apply`` prints, one string each: a step is a line indented by
two spaces, and its comment (``# now OLD; machine-wide ...``) may wrap onto lines
indented further to fit the width; those are joined back as ``COMMAND    # COMMENT``."""

from __future__ import annotations


def plan_steps(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "change(s) for" in ln) + 1
    steps: list[str] = []
    for ln in lines[start:]:
        if ln.startswith("   ") and steps:  # a wrapped comment or command
            rest = ln.strip()
            steps[-1] += ("    " if rest.startswith("#") else " ") + rest
        elif ln.startswith("  ") and not ln.startswith("   "):
            steps.append(ln.rstrip())
        else:
            break
    return steps
