"""The published history (``python -m ci.history.publish``; the main job's publish): site_build (the steps),
asv_window (asv over the newest commits), asv_html + asv_html_notes.js (asv's plug-in) with offline_html (the
pinned ``ci/history/vendor`` libraries) and asv_steps, and the kernel pages: kernel_page, kernel_figure,
page_changes, device_peaks, commit_info, issue_links."""
