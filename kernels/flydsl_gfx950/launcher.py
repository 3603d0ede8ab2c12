"""The launcher: host-side preparation and launch of the gfx950 4-wave MXFP4 GEMM.

``prepare_launch`` preshuffles B and both scale tensors (kernels.preshuffle),
compiles the kernel for this K (kernel_body.build_launcher) and returns the
zero-argument launch the registry contract asks for.

NOT YET RUN ON A GFX950: the argument passing (flat torch tensors as fx.Tensor,
the current torch stream as fx.Stream) follows FlyDSL's own gfx950 GEMM tests
and the installed FlyDSL 0.5.0 API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from kernels import preshuffle
from kernels.flydsl_gfx950.kernel_body import build_launcher
from kernels.mxfp4 import MXFP4Tensor


def prepare_launch(a: MXFP4Tensor, b: MXFP4Tensor, out: torch.Tensor, config: Mapping[str, Any]) -> Callable[[], None]:
    """Preshuffle, compile for K, and return ``launch()`` writing C into ``out``."""
    import flydsl.compiler as flyc

    m, n, k = a.rows, b.rows, a.k
    b_data = preshuffle.shuffle_weight(b.data)
    a_scales = preshuffle.shuffle_scales(a.scales)
    b_scales = preshuffle.shuffle_scales(b.scales)
    launch = build_launcher(k=k, **config)
    args = (
        a.data.reshape(-1),
        b_data.reshape(-1),
        out.view(-1),
        a_scales.reshape(-1),
        b_scales.reshape(-1),
        m,
        n,
        torch.cuda.current_stream(out.device),
    )
    compiled = flyc.compile(launch, *args)

    def run() -> None:
        compiled(*args)

    return run
