package io.sparkdlq.engine.pulsar;

import java.io.IOException;

import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * An executor task's read of one {@link TopicRange}, with a non-durable reader of the partition
 * ({@link ReaderPool}): the messages after the start entry, up to the end entry's last message.
 * The end came from the broker, so each message is there: one that does not come within
 * {@link #READ_TIMEOUT_MS} fails the task (and the batch, before anything is committed).
 */
final class RangeReader implements PartitionReader<InternalRow> {
  /** How long a task waits for a message it knows is there before it fails the batch. */
  static final int READ_TIMEOUT_MS = 30_000;

  private final TopicRange range;
  private final UTF8String topic;
  private final int partition;
  private ReaderPool.Lease lease;
  private InternalRow current;
  private boolean finished;

  RangeReader(TopicRange range) {
    this.range = range;
    this.topic = UTF8String.fromString(range.topic());
    this.partition = Position.partitionIndex(range.partition());
  }

  @Override
  public boolean next() throws IOException {
    if (finished) {
      return false;
    }
    if (lease == null) {
      lease = ReaderPool.take(range.broker(), range.partition(), range.start());
    }
    while (true) {
      Message<byte[]> message = lease.next(READ_TIMEOUT_MS);
      if (message == null) {
        throw new PulsarConnectorException("Pulsar topic " + range.partition() + ": no message up to " + range.end()
            + " after " + READ_TIMEOUT_MS + " ms (read from " + range.start() + ")");
      }
      Position at = Position.of(message.getMessageId());
      if (at.isAfter(range.end())) {
        lease.keep(message);
        finished = true;
        return false;
      }
      if (!at.isAfter(range.start())) {
        continue;
      }
      current = MessageRows.row(topic, partition, message);
      if (at.equals(range.end()) && lastOfEntry(message)) {
        finished = true;
      }
      return true;
    }
  }

  /** Whether no message of the same entry follows this one (a producer's batch is one entry). */
  private boolean lastOfEntry(Message<byte[]> message) throws PulsarClientException {
    MessageIdAdv id = (MessageIdAdv) message.getMessageId();
    if (id.getBatchIndex() < 0) {
      return true;
    }
    if (id.getBatchSize() > 0) {
      return id.getBatchIndex() >= id.getBatchSize() - 1;
    }
    return !lease.hasMessageAvailable();
  }

  @Override
  public InternalRow get() {
    return current;
  }

  @Override
  public void close() {
    if (lease == null) {
      return;
    }
    if (finished) {
      ReaderPool.giveBack(lease, range.end());
    } else {
      lease.close();
    }
    lease = null;
  }

  /** Makes the executors' readers. */
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return new RangeReader((TopicRange) partition);
    }
  }
}
