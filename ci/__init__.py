"""CI entry points: each module is a command with ``main(argv=None) -> int``.

Exit codes everywhere: 0 pass, 1 a gate failed, 2 the harness itself failed.
"""
