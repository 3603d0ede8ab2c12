"""The history as series: regressions (change points and the drift guard), machine_spread (two runners of one
GPU model side by side) and views (the newest commits, every line thinned)."""
