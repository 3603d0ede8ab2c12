"""asv's results folder on this machine (``.asv/results``): read, checked and kept.

folder (the only module that opens results files and records: checks, quarantine, reconcile), store (each file
summarized once, kept in SQLite, read back as one History), result_points (files merged point by point), ledger
(each file's stat and blob id: what changed since the last look).
"""
