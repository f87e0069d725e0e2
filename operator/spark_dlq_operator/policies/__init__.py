"""A DeadLetterPolicy's life in the operator, one module per subject.

Pure modules (no I/O, no client; unit-tested as plain functions) sit beside the I/O modules that
send what they decide:

- ``status``: the policy's conditions and phase, and its next status from an ``Observation``;
  ``announcements``: the events a status change announces (one table by condition type);
  ``status_writer`` writes it (read-modify-write on the status subresource) and posts the events.
- ``application_state``: what a SparkApplication's state means for JobRunning, and when a failed
  one is due for resubmission; ``watcher`` maps its events onto the policy and resubmits it.
- ``supervision``: the driver's heartbeat read as JobRunning (stalled, pending), BreakerClosed
  and ``status.ordering``; ``supervisor`` acts on it once per resync round.
- ``services``: the clients and state one operator process shares (built at start-up).
- ``provisioning``: which provisioner a policy's topics use, and TopicsReady from it.
- ``application``: the ConfigMap, the Spark pods' identity and the SparkApplication written.
- ``reconcile``: the steps in order, from ``render.desired`` (rendered once per reconcile).
- ``cleanup``: the topics deleted with the policy.

The manifests themselves are ``render``'s; the names they carry are ``naming``'s.
"""
