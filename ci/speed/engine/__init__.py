"""The measuring engine: warm worker processes that time both sides' kernels, round by round, on one or more GPUs.

warm_engine.py runs the rounds (WarmEngine); device_state.py is its per-device bookkeeping; worker_handle.py
starts, asks and ends one worker; spares.py starts the next generation early; worker.py is the worker itself
(``python -m ci.speed.engine.worker``) and survey.py what it knows about its commit; rounds.py the round, its
record and a run's GPU seconds; devices.py which GPU measures which benchmark; grace.py the deadline's grace.
"""
