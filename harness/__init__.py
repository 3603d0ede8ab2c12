"""What measures: timing, GPU state, operand generation, accuracy judgement, resource inspection, reports, statistics.

Imports nothing from kernels/ or ci/ (tests/test_harness_boundary.py enforces it): the asv suite and the gates measure
any commit's kernels with this checkout's harness, so a number never depends on which commit's code did the measuring.
"""
