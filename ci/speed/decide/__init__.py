"""From recorded rounds to verdicts: what is measured, which rounds count, under which noise and threshold.

codes.py the outcomes as codes; selection.py which benchmarks are gated; exclusion.py which rounds may be
used; thresholds.py the committed thresholds; noise_file.py a runner's noise model file; generations.py that
model applied to one run's worker generations; verdict.py the decision per benchmark and the JSON record.
"""
