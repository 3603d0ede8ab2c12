"""Where the gates' verdicts are read: one PR comment edited in place, one GitHub issue per regression on main.

Decides nothing about speed or resources itself: it reports what the gates decided (the speed verdict is the base's,
which ``judge`` runs). Reads the pr-checks gates' JSON records, GitHub's job list and the history's ``changes.json``;
writes the comment's Markdown and, through ``gh api``, the comment and the regression issues. Command:
``python -m ci.notify judge | pr-files | comment | post-comment | regression-issues``. Standard library and the ``gh``
CLI only (``judge``'s child needs numpy, scipy). The modules, front to back: docs/PR_COMMENT.md, "The code".
"""
