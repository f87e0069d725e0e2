package io.sparkdlq.engine.pulsar;

import java.io.Serializable;

import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.impl.MessageIdImpl;

/**
 * A place in one partition: the entry {@code [ledger, entry]} of a message (a producer's batch is
 * one entry, so a position holds all of its messages). Positions order as the partition's
 * messages do; {@link #BEFORE_ALL} is before the first one.
 */
record Position(long ledger, long entry) implements Comparable<Position>, Serializable {
  static final Position BEFORE_ALL = new Position(-1, -1);

  static Position of(MessageId id) {
    MessageIdAdv known = (MessageIdAdv) id;
    return new Position(known.getLedgerId(), known.getEntryId());
  }

  /** The message id of this entry in the partition with index {@code partition} (-1: not a partition). */
  MessageId messageId(int partition) {
    return equals(BEFORE_ALL) ? MessageId.earliest : new MessageIdImpl(ledger, entry, partition);
  }

  boolean isAfter(Position other) {
    return compareTo(other) > 0;
  }

  static Position later(Position a, Position b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  @Override
  public int compareTo(Position other) {
    int byLedger = Long.compare(ledger, other.ledger);
    return byLedger != 0 ? byLedger : Long.compare(entry, other.entry);
  }

  @Override
  public String toString() {
    return ledger + ":" + entry;
  }

  /** {@code -partition-<n>} of a partition's topic name; -1 for a non-partitioned topic. */
  static int partitionIndex(String partitionTopic) {
    int at = partitionTopic.lastIndexOf("-partition-");
    if (at <= 0) {
      return -1;
    }
    String tail = partitionTopic.substring(at + "-partition-".length());
    return !tail.isEmpty() && tail.chars().allMatch(Character::isDigit) ? Integer.parseInt(tail) : -1;
  }
}
