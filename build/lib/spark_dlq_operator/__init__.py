"""The spark-dlq operator: runs DeadLetterPolicies on Kubernetes with kopf.

For each policy it provisions the retry and dead-letter topics, writes the engine's policy into
a ConfigMap, runs the engine as a SparkApplication and reports progress in the policy's status.
See operator/README.md for flags, created objects and the RBAC it needs.
"""
