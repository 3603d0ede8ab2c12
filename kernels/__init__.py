"""MXFP4 GEMM kernels under measurement: the format, the reference, the registry and the kernels."""
