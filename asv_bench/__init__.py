"""The asv suite: GEMM time per commit for every registered kernel configuration (bench_gemm; TFLOPS and each
measurement's conditions in its records, asv_bench.records) and compiled resource usage per commit
(bench_resources). Run from the repository root: ``asv run``, ``asv continuous``, ``asv publish`` (see
asv.conf.json and ``python -m ci.history --help``).

asv runs today's suite against every commit it benchmarks, with the project as installed at that commit.
Hence the rules in asv_bench.common: parameters are fixed data, the project is imported inside ``setup``
(an old commit without a module or kernel gives n/a with the reason), and the measuring code is this
checkout's, so the method stays the same along the history.
"""
