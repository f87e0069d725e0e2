"""The Spark wiring: session, sources, the delay stage, the routing call, the Kafka sink."""
