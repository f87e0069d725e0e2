package io.sparkdlq.engine.pulsar;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TopicMessageId;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's side of a read: which messages each micro-batch reads, and the durable subscription.
 *
 * <p>A micro-batch's offsets are each partition's {@link Position} (its last entry), from the
 * broker's last message id, at most {@code maxEntriesPerTrigger} entries past where the batch
 * starts ({@link EntryLimit}). Spark hands a source that supports admission control where each
 * batch starts, the checkpoint's end on a restart too, so every batch is limited, the first of
 * each run included: a driver killed during a backlog reads again at most its batches in flight.
 *
 * <p>The driver holds one Exclusive consumer per partition on the durable subscription named by
 * {@code subscription}, with no prefetch: it receives nothing, it only acknowledges each
 * partition's end position cumulatively when Spark commits a batch. So the subscription holds every
 * message the checkpoint has not committed (the broker keeps them), its backlog is the engine's
 * lag, and only one engine at a time reads the topic under that name.
 */
final class PulsarMicroBatchStream implements MicroBatchStream, SupportsAdmissionControl {
  private static final Logger LOG = LoggerFactory.getLogger(PulsarMicroBatchStream.class);

  private final ReadOptions options;
  private final Map<String, Consumer<byte[]>> consumers = new HashMap<>();
  private PulsarOffset latest;

  PulsarMicroBatchStream(ReadOptions options) {
    this.options = options;
  }

  private PulsarClient client() {
    return Clients.client(options.broker());
  }

  private List<String> partitions() {
    try {
      return client().getPartitionsForTopic(options.topic(), false)
          .get(Clients.OPERATION_TIMEOUT_S, TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException | InterruptedException error) {
      throw PulsarConnectorException.of("Pulsar topic '" + options.topic() + "': cannot look it up", error);
    }
  }

  /**
   * The driver's consumer of the durable subscription on one partition, created on first use: from
   * the earliest message when the subscription is new, so that it holds what the engine has not
   * committed yet.
   */
  private Consumer<byte[]> consumer(String partition) {
    Consumer<byte[]> consumer = consumers.get(partition);
    if (consumer == null) {
      try {
        consumer = client().newConsumer()
            .topic(partition)
            .subscriptionName(options.subscription())
            .subscriptionType(SubscriptionType.Exclusive)
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
            .receiverQueueSize(0)
            .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS)
            .subscribe();
      } catch (PulsarClientException error) {
        throw PulsarConnectorException.of(
            "Pulsar topic " + partition + ": cannot subscribe '" + options.subscription() + "'", error);
      }
      consumers.put(partition, consumer);
    }
    return consumer;
  }

  /** Each partition's last entry ({@link Position#BEFORE_ALL} when it has none), asked of all at once. */
  private Map<String, Position> ends(List<String> partitions) {
    Map<String, CompletableFuture<List<TopicMessageId>>> asked = new LinkedHashMap<>();
    for (String partition : partitions) {
      asked.put(partition, consumer(partition).getLastMessageIdsAsync());
    }
    Map<String, Position> ends = new TreeMap<>();
    for (Map.Entry<String, CompletableFuture<List<TopicMessageId>>> answer : asked.entrySet()) {
      List<TopicMessageId> last;
      try {
        last = answer.getValue().get(Clients.OPERATION_TIMEOUT_S, TimeUnit.SECONDS);
      } catch (ExecutionException | TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("Pulsar topic " + answer.getKey() + ": cannot get its last message id", error);
      }
      Position end = last.isEmpty() ? Position.BEFORE_ALL : Position.of(last.get(0));
      ends.put(answer.getKey(), end.entry() >= 0 ? end : Position.BEFORE_ALL);
    }
    return ends;
  }

  @Override
  public Offset initialOffset() {
    List<String> partitions = partitions();
    if (!options.earliest()) {
      return new PulsarOffset(ends(partitions));
    }
    Map<String, Position> start = new TreeMap<>();
    for (String partition : partitions) {
      consumer(partition); // the subscription exists, and holds, from now on
      start.put(partition, Position.BEFORE_ALL);
    }
    return new PulsarOffset(start);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return options.maxEntries() > 0 ? ReadLimit.maxRows(options.maxEntries()) : ReadLimit.allAvailable();
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(PulsarDataSource.NAME + " is read with latestOffset(start, limit)");
  }

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    PulsarOffset start = (PulsarOffset) startOffset;
    Map<String, Position> ends = ends(partitions());
    latest = new PulsarOffset(ends);
    if (limit instanceof ReadMaxRows max) {
      ends = EntryLimit.cap(start.positions(), ends, max.maxRows(), this::firstAfter);
    }
    Map<String, Position> next = new TreeMap<>(start.positions());
    ends.forEach((partition, end) -> next.merge(partition, end, Position::later));
    return new PulsarOffset(next);
  }

  @Override
  public Offset reportLatestOffset() {
    return latest;
  }

  /** The position of the partition's first message after {@code position}; null when none comes in time. */
  private Position firstAfter(String partition, Position position) {
    return PulsarTopics.firstAfter(options.broker(), partition, position);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
    PulsarOffset start = (PulsarOffset) startOffset;
    List<InputPartition> ranges = new ArrayList<>();
    ((PulsarOffset) endOffset).positions().forEach((partition, end) -> {
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

  @Override
  public Offset deserializeOffset(String json) {
    return PulsarOffset.fromJson(json);
  }

  /** Acknowledge each partition's end position on the durable subscription (cumulatively). */
  @Override
  public void commit(Offset end) {
    ((PulsarOffset) end).positions().forEach((partition, position) -> {
      if (position.entry() < 0) {
        return;
      }
      consumer(partition).acknowledgeCumulativeAsync(position.messageId(Position.partitionIndex(partition)))
          .exceptionally(error -> {
            // The checkpoint, not the subscription, says where the next batch starts: a lost
            // acknowledgement only leaves the subscription further behind until the next one.
            LOG.warn("Pulsar topic {}: acknowledging {} on '{}' failed: {}", partition, position,
                options.subscription(), PulsarConnectorException.describe(error));
            return null;
          });
    });
  }

  @Override
  public void stop() {
    for (Consumer<byte[]> consumer : consumers.values()) {
      try {
        consumer.close();
      } catch (PulsarClientException error) {
        LOG.warn("closing the consumer of {}: {}", consumer.getTopic(), PulsarConnectorException.describe(error));
      }
    }
    consumers.clear();
  }

  @Override
  public String toString() {
    return PulsarDataSource.NAME + "[" + options.topic() + "]";
  }
}
