package io.sparkdlq.engine.pulsar;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/**
 * A batch read of given positions (a redrive's chunk of a dead-letter topic): for each partition of
 * {@code endingPositions}, the messages after its {@code startingPositions} entry ({@link
 * Position#BEFORE_ALL} when absent) up to its end entry, inclusive, read by the executors' readers
 * as a micro-batch's ranges are ({@link RangeReader}: non-durable, no subscription made or moved).
 * The ends came from the broker ({@link PulsarTopics#lastPositions}), so each message is there.
 */
final class PulsarBatch implements Batch {
  private final ReadOptions options;

  PulsarBatch(ReadOptions options) {
    if (options.endingPositions().isBlank()) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": a batch read needs endingPositions");
    }
    this.options = options;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    PulsarOffset start = PulsarOffset.fromJson(options.startingPositions());
    List<InputPartition> ranges = new ArrayList<>();
    PulsarOffset.fromJson(options.endingPositions()).positions().forEach((partition, end) -> {
      Position first = start.get(partition);
      if (end.isAfter(first)) {
        ranges.add(new TopicRange(options.broker(), options.topic(), partition, first, end));
      }
    });
    return ranges.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new RangeReader.Factory();
  }
}
