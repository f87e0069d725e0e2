"""``kubectl dlq``: look at a DeadLetterPolicy's dead letters from a laptop.

    kubectl dlq stats (-f policy.yaml | --policy NAME [-n NS]) [--since 1h | --after T] [--before T]
    kubectl dlq ls    (-f ... | --policy ...) [--reason R]... [--error-class C]... [--key K] [--limit N]
    kubectl dlq show  (-f ... | --policy ...) PARTITION/OFFSET
    kubectl dlq redrive (-f ... | --policy ...) [selection] [--to DEST] [--execute]

Installed as the executable ``kubectl-dlq`` (pyproject.toml), which kubectl runs as a plugin. A
program of its own beside the operator: it shares the engine's policy model, the dead letter and
its headers (``dlq_engine.model.dead_letter``, ``dlq_engine.model.headers``: the redrive job reads
the same facts) and the operator's class rules (which broker a policy that names none gets), and
nothing else of either. The policy names the broker and the dead-letter topic; the topic is read
without a trace on the broker (Kafka: a consumer assigned its partitions that never joins its
group or commits; Pulsar: a reader, no subscription) up to the end it had when the command
started. Exit status: 0 done, 1 the broker or the cluster could not be reached or refused, 2 bad
input (one line naming the problem). docs/reference.md, "Triage: kubectl dlq", is the user's
reference.

The modules, each one concern, from the command line down (an import contract in pyproject.toml
keeps the order):

- ``plugin``: the executables kubectl runs (``kubectl-dlq``, ``kubectl_complete-dlq``);
- ``cli``: the parser and what ``stats``, ``ls`` and ``show`` do; ``redrive``: the redrive command;
- ``readers``: the one dispatch on the broker type; ``kafka_reader`` and ``pulsar_reader``;
- ``target``: where the dead letters are and how to reach their broker; ``policies``: the policy
  from a file or the cluster (kubectl);
- ``render`` (output), ``letters`` (select, count), ``expired``, ``progress``, ``times``,
  ``errors``: pure.
"""
