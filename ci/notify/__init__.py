"""Where the gates' verdicts are read: one PR comment edited in place, one GitHub issue per regression on main.

Decides nothing about speed or resources itself: it reports what the gates decided (the speed
verdict: the default branch's gate on the PR's recorded rounds, which ``judge`` runs). Reads: the
pull-request gates' JSON records (speed gate, speed changes, register budget) from a
pr-checks run's artifacts, GitHub's job list of that run, and the history site build's
``changes.json`` (change points and the drift guard). Writes: the comment's Markdown, and
through ``gh api`` the comment (created once, then edited) and the regression issues.
Command: ``python -m ci.notify judge | pr-files | comment | post-comment | regression-issues``. Standard
library only (plus the ``gh`` CLI); only ``judge`` needs numpy and scipy (in the child it starts).

Modules, front to back:
  front.py      argparse -> one frozen Options, checked -> the command (commands.py)
  records.py    the gates' JSON as data: size cap, schema check, typed fields (the one place that knows their keys)
  bundle.py     the artifact layout of a pr-checks run attempt -> records
  comment.py    records -> the comment's Markdown (pure)
  judge.py      the speed record's rounds decided by this checkout's gate (python -m ci.speed --replay --judge)
  gate_files.py GitHub's list of the PR's files -> those that are the gate itself
  status.py     the comment's speed verdict -> the commit status (pure)
  markdown.py   untrusted text as code spans, tables, <details>, the 65536-character cap
  history.py    the history-changes JSON -> findings (slowdowns, drift), recovered or not
  issue_state.py  what a regression issue tracks, kept as the hidden first line of its body (strictly parsed)
  matching.py   findings + the issues there are -> which issue each belongs to, what each becomes (pure)
  issues.py     an issue's title, body and status comments from its state (pure)
  github.py     `gh api` calls, GitHub's rate limits waited out
  post.py       the comment found again and edited; the PR found from the event; the issues filed
"""
