"""Where the gates' verdicts are read: one PR comment edited in place, one GitHub issue per regression on main. It
decides nothing itself; standard library and the ``gh`` CLI only. The modules: docs/PR_COMMENT.md, "The code"."""
