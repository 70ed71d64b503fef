"""``python -m evalengine.cli``."""

from evalengine.cli import run

run()
