"""python -m ci.history: the main job (see ci.history.main_job)."""

import sys

from ci.history.main_job import main

sys.exit(main())
