"""python -m ci.bisect: the culprit of a slowdown between a good and a bad commit (see ci.bisect.options)."""

import sys

from ci.bisect.options import main

sys.exit(main())
