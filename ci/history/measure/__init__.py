"""The main job's measuring, from the commits to asv's results: tracks (``--tracks``), track_steps (plan,
measure, stamp, copy), identical + copies (identical code is not measured), asv_driver (``asv run``),
machine_info, progress (the screen) and summary (what this run measured, as tables)."""
