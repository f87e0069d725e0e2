package io.sparkdlq.engine.pulsar;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.TopicMessageId;

/**
 * The engine's checks before a run on Pulsar (called from Python, dlq_engine.job.pulsar_topics), and
 * the positions a redrive reads between (dlq_engine.job.redrive_topics): looked up with
 * non-durable readers, so no subscription is made or moved.
 */
public final class PulsarTopics {
  private PulsarTopics() {
  }

  /**
   * The topics of {@code names} that do not exist on the broker at {@code serviceUrl}, reached
   * with the client settings of {@code clientDir} (looked up without creating them, whatever the
   * broker's auto-creation); a broker that does not answer within {@code timeoutMs}, or refuses
   * the client, raises {@link PulsarConnectorException}.
   */
  public static List<String> missing(String serviceUrl, String clientDir, List<String> names, long timeoutMs) {
    Broker broker = new Broker(serviceUrl, clientDir);
    List<String> missing = new ArrayList<>();
    for (String name : names) {
      try {
        Clients.client(broker).getPartitionsForTopic(name, false).get(timeoutMs, TimeUnit.MILLISECONDS);
      } catch (ExecutionException error) {
        if (error.getCause() instanceof PulsarClientException.NotFoundException
            || error.getCause() instanceof PulsarClientException.TopicDoesNotExistException) {
          missing.add(name);
        } else {
          throw PulsarConnectorException.of("looking up " + name, error);
        }
      } catch (TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("looking up " + name + ": no answer within " + timeoutMs + " ms", error);
      }
    }
    return missing;
  }

  /**
   * Why the client may not write to each of {@code topics}: {@code <topic>: <error>} for each
   * topic the broker refused a producer on for want of the produce permission, nothing for the
   * others (a topic that does not exist is {@link #missing}'s to name). No message is sent; the
   * producers are closed at once. Credentials the broker refuses raise {@link
   * PulsarConnectorException}.
   */
  public static List<String> unwritable(String serviceUrl, String clientDir, List<String> topics, long timeoutMs) {
    Broker broker = new Broker(serviceUrl, clientDir);
    List<String> refused = new ArrayList<>();
    for (String topic : topics) {
      try {
        Producer<byte[]> producer = Clients.client(broker).newProducer().topic(topic).enableBatching(false)
            .createAsync().get(timeoutMs, TimeUnit.MILLISECONDS);
        producer.closeAsync();
      } catch (ExecutionException error) {
        Throwable cause = error.getCause();
        if (cause instanceof PulsarClientException.AuthorizationException) {
          refused.add(topic + ": " + PulsarConnectorException.describe(error));
        } else if (!(cause instanceof PulsarClientException.NotFoundException
            || cause instanceof PulsarClientException.TopicDoesNotExistException)) {
          throw PulsarConnectorException.of("a producer on " + topic, error);
        }
      } catch (TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("a producer on " + topic + ": no answer within " + timeoutMs + " ms", error);
      }
    }
    return refused;
  }

  /**
   * Each partition's last entry now ({@link Position#BEFORE_ALL} when it has none), in {@link
   * PulsarOffset}'s layout: a redrive's snapshot of {@code topic}. A topic that does not exist
   * raises {@link PulsarConnectorException} naming it.
   */
  public static String lastPositions(String serviceUrl, String clientDir, String topic, long timeoutMs) {
    Broker broker = new Broker(serviceUrl, clientDir);
    List<String> partitions;
    try {
      partitions = Clients.client(broker).getPartitionsForTopic(topic, false).get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException | TimeoutException | InterruptedException error) {
      throw PulsarConnectorException.of("Pulsar topic '" + topic + "': cannot look it up", error);
    }
    Map<String, Position> last = new TreeMap<>();
    for (String partition : partitions) {
      try (Reader<byte[]> reader = Clients.client(broker).newReader()
          .topic(partition)
          .startMessageId(MessageId.latest)
          .receiverQueueSize(1)
          .create()) {
        List<TopicMessageId> ids = reader.getLastMessageIdsAsync().get(timeoutMs, TimeUnit.MILLISECONDS);
        Position end = ids.isEmpty() ? Position.BEFORE_ALL : Position.of(ids.get(0));
        last.put(partition, end.entry() >= 0 ? end : Position.BEFORE_ALL);
      } catch (IOException | ExecutionException | TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("Pulsar topic " + partition + ": cannot get its last message id", error);
      }
    }
    return new PulsarOffset(last).json();
  }

  /**
   * Where a read from {@code starts} towards {@code ends} (both in {@link PulsarOffset}'s layout)
   * stops when it may read at most {@code limit} entries over all partitions ({@link EntryLimit},
   * as a micro-batch's end is capped): a redrive's next chunk.
   */
  public static String chunkEnds(String serviceUrl, String clientDir, String starts, String ends, long limit) {
    Broker broker = new Broker(serviceUrl, clientDir);
    Map<String, Position> capped = EntryLimit.cap(PulsarOffset.fromJson(starts).positions(),
        PulsarOffset.fromJson(ends).positions(), limit,
        (partition, position) -> firstAfter(broker, partition, position));
    return new PulsarOffset(capped).json();
  }

  /** The position of the partition's first message after {@code position}; null when none comes in time. */
  static Position firstAfter(Broker broker, String partition, Position position) {
    try (Reader<byte[]> reader = Clients.client(broker).newReader()
        .topic(partition)
        .startMessageId(position.messageId(Position.partitionIndex(partition)))
        .receiverQueueSize(2)
        .create()) {
      while (true) {
        Message<byte[]> message = reader.readNext(RangeReader.READ_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        if (message == null) {
          return null;
        }
        Position found = Position.of(message.getMessageId());
        if (found.isAfter(position)) {
          return found;
        }
      }
    } catch (IOException error) {
      throw PulsarConnectorException.of(
          "Pulsar topic " + partition + ": cannot read the first message after " + position, error);
    }
  }
}
