"""spark-dlq's benchmarks: ``bench/run.sh`` (``python -m bench.run``) runs them all and writes
``docs/benchmarks.md``, the plots beside it and JSON results under ``bench/results/``."""
