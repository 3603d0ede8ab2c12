"""Culprit bisection over main's first-parent history (issue 20): ``python -m ci.bisection --good A --bad B --bench X``.

options.py is the front (argparse -> :class:`ci.bisection.options.BisectOptions`); engine.py the bisection,
which sees commits, a fingerprint key and a measurer, nothing else; measurer.py the real measurer (the speed
gate's interleaved A/B engine, run as ``python -m ci.speed ... --json``) and the real fingerprint key;
report.py the Markdown step summary and the JSON.

Named ``bisection``, not ``bisect`` as issue 20 wrote it: run from inside ci/ (tests/test_harness_boundary
runs every command from every directory), a ``ci/bisect`` package shadows the standard library's ``bisect``,
which numpy, random and git import, and every command there fails.
"""
