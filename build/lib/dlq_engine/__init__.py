"""spark-dlq's routing engine. A processor imports its contract from here:

    from dlq_engine import Message, Retry, Terminate

Importing this package does not import Spark.
"""

from dlq_engine.model.processor_api import Message, Retry, Terminate

__all__ = ["Message", "Retry", "Terminate"]
