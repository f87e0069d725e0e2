"""Routing decisions: pure functions from a processed message to where it goes next (the
outcome of a processor call, the backoff, the headers, the per-batch statistics).

Nothing here reads or writes Kafka, builds a Spark query, calls the processor or starts a
thread: ``dlq_engine.processing`` does the calling and applies these decisions, so everything
here can be tested with plain values.
"""
