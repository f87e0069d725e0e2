"""The exit statuses of ``dlq-engine``, in one place: the CLI, the job runner, the tests and
docs/reference.md all use these."""

from typing import Final

#: A clean stop: SIGTERM, or ``--once`` drained what was there.
EXIT_OK: Final = 0
#: The query failed, or a check before it started did (broker, topics, rights, the engine's jar).
EXIT_FAILED: Final = 1
#: A bad policy file or processor: nothing was started.
EXIT_BAD_INPUT: Final = 2
#: The ``stop`` dead-letter strategy stopped the job.
EXIT_STOP_STRATEGY: Final = 3
#: The error window (``spec.errorWindow``) stopped the job.
EXIT_ERROR_WINDOW: Final = 4
#: Another engine holds the checkpoint's lease (or took it over from this one): never two
#: drivers on one checkpoint.
EXIT_CHECKPOINT_LOCKED: Final = 5
