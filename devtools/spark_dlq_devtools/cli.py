"""``spark-dlq-dev``: the development tools from the command line.

spark-dlq-dev demo [--orders N] [--seed S]     the local end-to-end demo
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-dlq-dev", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the local end-to-end demo")
    demo.add_argument("--orders", type=int, default=400, help="orders in the first wave (default 400)")
    demo.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        from spark_dlq_devtools.demo import main as demo_main

        return demo_main(orders=args.orders, seed=args.seed)
    return 2


if __name__ == "__main__":
    sys.exit(main())
