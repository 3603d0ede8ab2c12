"""What the three tools share: git access, a commit's kernels under today's harness, the one correctness check, one job
per checkout, and the shared command-line options. Imports nothing from ci.speed, ci.budget or ci.history."""
