"""`python -m strom_tools ...`: the `strom` command without the console script, as the tests,
the benchmarks and deploy/local start nodes and tools."""

import sys

from strom_tools.cli import main

sys.exit(main())
