"""``python -m spark_dlq_operator.kubectl_dlq``: the plugin as the ``kubectl-dlq`` executable runs it."""

from __future__ import annotations

import sys

from spark_dlq_operator.kubectl_dlq.plugin import main

if __name__ == "__main__":
    sys.exit(main())
