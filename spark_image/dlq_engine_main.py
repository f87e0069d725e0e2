"""The Spark application file the operator's SparkApplication names
(``local:///opt/spark-dlq/dlq_engine_main.py``): spark-submit runs this file, which hands its
arguments to ``dlq-engine``."""

import sys

from dlq_engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
