package io.sparkdlq.engine.pulsar;

import java.util.Map;
import java.util.TreeMap;

/**
 * {@code maxEntriesPerTrigger}: where a micro-batch that starts at {@code last} ends when it may
 * read at most {@code limit} entries over all partitions, shared evenly by the partitions that
 * have messages past {@code last}.
 *
 * <p>Entry ids are consecutive within a ledger, so within the ledger a partition's batch ends
 * {@code share} entries on without reading anything. When the partition's last message is in a
 * later ledger (Pulsar rolls a ledger over after so many entries, and when a topic is loaded
 * again), the first message after {@code last} says which ledger comes next: the batch ends
 * {@code share} entries into it (a ledger may close before that entry; the reader then stops at
 * the next ledger's first message), so every batch moves on.
 */
final class EntryLimit {
  /** The position of the partition's first message after {@code position}; null when there is none. */
  interface Next {
    Position after(String partition, Position position);
  }

  private EntryLimit() {
  }

  static Map<String, Position> cap(Map<String, Position> last, Map<String, Position> ends, long limit, Next next) {
    Map<String, Position> capped = new TreeMap<>(ends);
    long behind = ends.entrySet().stream()
        .filter(end -> end.getValue().isAfter(last.getOrDefault(end.getKey(), Position.BEFORE_ALL))).count();
    if (behind == 0) {
      return capped;
    }
    long share = Math.max(1, limit / behind);
    for (Map.Entry<String, Position> end : ends.entrySet()) {
      String partition = end.getKey();
      Position known = last.getOrDefault(partition, Position.BEFORE_ALL);
      Position to = end.getValue();
      if (!to.isAfter(known)) {
        continue;
      }
      if (!known.equals(Position.BEFORE_ALL) && known.ledger() == to.ledger()) {
        capped.put(partition, new Position(to.ledger(), Math.min(to.entry(), known.entry() + share)));
        continue;
      }
      Position first = next.after(partition, known);
      if (first == null) {
        continue;
      }
      long entry = first.entry() - 1 + share;
      capped.put(partition, new Position(first.ledger(), first.ledger() == to.ledger() ? Math.min(to.entry(), entry) : entry));
    }
    return capped;
  }
}
