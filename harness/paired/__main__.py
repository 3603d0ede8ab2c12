"""``python -m harness.paired``: print the speed gate's simulated verdict rates (docs/SPEED_GATE.md)."""

import sys

from harness.paired.scenarios import main

sys.exit(main())
