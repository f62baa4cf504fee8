"""python3 -m posenc.experiments.extrapolation [options] -o DIR (see cli.py)."""
import sys

from .cli import main

sys.exit(main())
