"""python -m ci.notify: the PR comment and the regression issues (see ci.notify.front)."""

import sys

from ci.notify.front import main

sys.exit(main())
