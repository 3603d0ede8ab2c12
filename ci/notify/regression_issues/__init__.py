"""Regression issues on main: one issue per regression for its whole life.

history (the site build's changes.json as findings), matching (which issue a finding belongs to),
issue_state (the state marker each issue carries) and issues (filing, editing and closing them through
GitHub, rate limits honoured). The rules: docs/PR_COMMENT.md, "One issue per regression on main".
"""
