"""``python -m minic``: see minic/cli/."""
import sys

from minic.cli import main

sys.exit(main())
