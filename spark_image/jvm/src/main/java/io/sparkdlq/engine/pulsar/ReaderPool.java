package io.sparkdlq.engine.pulsar;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;

/**
 * The executors' non-durable readers, kept between micro-batches: a task that finished its range
 * gives its reader back with the position it read to, and the task of the next batch that starts
 * there takes it, with what it has prefetched since (as Spark's Kafka source keeps its consumers).
 * A reader is only ever reused from exactly where it stopped, so a range reads the same messages
 * as a new reader would; one unused for {@link #IDLE_MS} is closed.
 */
final class ReaderPool {
  /** Messages a reader prefetches. */
  static final int RECEIVER_QUEUE = 1000;
  /** How long an idle reader is kept. */
  static final long IDLE_MS = 60_000;

  private static final Map<String, List<Lease>> IDLE = new HashMap<>();

  private ReaderPool() {
  }

  /** A reader of {@code partition} whose next message is the first after {@code start}. */
  static Lease take(Broker broker, String partition, Position start) {
    String key = broker.key() + " " + partition;
    synchronized (IDLE) {
      closeIdle();
      List<Lease> kept = IDLE.getOrDefault(key, List.of());
      for (Iterator<Lease> it = kept.iterator(); it.hasNext();) {
        Lease lease = it.next();
        if (lease.position.equals(start)) {
          it.remove();
          return lease;
        }
      }
    }
    try {
      Reader<byte[]> reader = Clients.client(broker).newReader()
          .topic(partition)
          .startMessageId(start.messageId(Position.partitionIndex(partition)))
          .receiverQueueSize(RECEIVER_QUEUE)
          .create();
      return new Lease(key, reader, start);
    } catch (PulsarClientException error) {
      throw PulsarConnectorException.of("Pulsar topic " + partition + ": cannot read", error);
    }
  }

  /** Keep the lease's reader for the range that starts at {@code position}. */
  static void giveBack(Lease lease, Position position) {
    lease.position = position;
    lease.idleSince = System.nanoTime();
    synchronized (IDLE) {
      IDLE.computeIfAbsent(lease.key, k -> new ArrayList<>()).add(lease);
    }
  }

  private static void closeIdle() {
    long now = System.nanoTime();
    for (Iterator<List<Lease>> lists = IDLE.values().iterator(); lists.hasNext();) {
      List<Lease> leases = lists.next();
      leases.removeIf(lease -> {
        boolean stale = now - lease.idleSince > TimeUnit.MILLISECONDS.toNanos(IDLE_MS);
        if (stale) {
          lease.close();
        }
        return stale;
      });
      if (leases.isEmpty()) {
        lists.remove();
      }
    }
  }

  /** A reader in use, with the one message it read past its last range (if any). */
  static final class Lease {
    private final String key;
    private final Reader<byte[]> reader;
    private Position position;
    private Message<byte[]> kept;
    private long idleSince;

    private Lease(String key, Reader<byte[]> reader, Position position) {
      this.key = key;
      this.reader = reader;
      this.position = position;
    }

    /** The next message; null when none came within {@code timeoutMs}. */
    Message<byte[]> next(int timeoutMs) throws PulsarClientException {
      if (kept != null) {
        Message<byte[]> message = kept;
        kept = null;
        return message;
      }
      return reader.readNext(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** Hand {@code message} out again first: it belongs to the next range. */
    void keep(Message<byte[]> message) {
      kept = message;
    }

    boolean hasMessageAvailable() throws PulsarClientException {
      return kept != null || reader.hasMessageAvailable();
    }

    void close() {
      reader.closeAsync();
    }
  }
}
