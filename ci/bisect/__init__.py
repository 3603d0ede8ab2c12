"""Culprit bisection over main's first-parent history (issue 20): ``python -m ci.bisect --good A --bad B --bench X``.

options.py is the front (argparse -> :class:`ci.bisect.options.BisectOptions`); engine.py the bisection,
which sees commits, a fingerprint key and a measurer, nothing else; measurer.py the real measurer (the speed
gate's interleaved A/B engine, run as ``python -m ci.speed ... --json``) and the real fingerprint key;
report.py the Markdown step summary and the JSON.
"""
