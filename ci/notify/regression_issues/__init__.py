"""Regression issues on main, one per regression for its whole life: docs/PR_COMMENT.md, "One issue per regression on
main"."""
