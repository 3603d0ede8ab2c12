"""python -m ci.budget: the PR resource-budget gate (see ci.budget.gate)."""

import sys

from ci.budget.gate import main

sys.exit(main())
