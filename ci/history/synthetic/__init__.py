"""Synthetic histories for tests and growth benchmarks: history (git commits and results files of any size),
cpu (a second machine, without a GPU) and summaries (the same history in memory)."""
