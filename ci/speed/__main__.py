"""python -m ci.speed: the PR speed gate (see ci.speed.gate)."""

import sys

from ci.speed.gate import main

sys.exit(main())
