"""Calling the team's processor on whole Arrow record batches and routing each message by
the pure decisions of ``dlq_engine.routing``: the processor's time limit (a helper thread that
can be abandoned) and the per-row loop live here, not among the decisions."""
