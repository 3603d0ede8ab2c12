"""What a PR's change can affect, decided on a CPU before any GPU time.

fingerprints.py both sides' code fingerprints and the decision data; unchanged.py the gate's use of it (the
benchmarks with identical code, skipped); arch.py the architecture the fingerprints are for; dependencies.py
the pinned dependencies a PR changes; summary.py what ``python -m ci.speed.changes`` reports.
"""
