"""Routing decisions: pure functions from a processed message to where it goes next.

Nothing here reads or writes Kafka or builds a Spark query; ``batches`` works on Arrow record
batches so the Spark job can hand it whole partitions, and everything can be tested with
plain values.
"""
