"""python -m ci.bisection: the culprit of a slowdown between a good and a bad commit (see ci.bisection.options)."""
import sys

from ci.bisection.options import main

sys.exit(main())
