"""What measures: timing, GPU state, operand generation, accuracy judgement, resource inspection, reports, statistics. Imports nothing from kernels/ or ci/."""
