"""The PR speed gate: is the head slower than its base, per (kernel, config, shape), with confidence?

``python -m ci.speed`` (front: ``gate``); what it reads, decides and writes: docs/SPEED_GATE.md, "The command".
"""
