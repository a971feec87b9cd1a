"""Makes ``docrun`` (the block runner beside this file) importable by the docs tests."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
