package io.sparkdlq.engine.pulsar;

import java.io.UncheckedIOException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/**
 * One Pulsar client per broker (and client settings) in each JVM (driver or executor), kept for the JVM's life as
 * Spark's Kafka connector keeps its producers, and the producers of the writes: a producer is
 * created once per topic and batching, and again only after it lost its broker connection (a topic
 * deleted, a broker gone), so that a write to a topic that is no longer there fails at once.
 *
 * <p>A client kept for the JVM's life must not keep the JVM alive: its threads (I/O, timer,
 * executors) are daemons only when the thread that builds it is one, and a driver's first client
 * is built on a Py4J thread, which is not. {@code spark-submit} returns from a Python application
 * that ended with 0 without {@code System.exit}, so a redrive's driver lived on after its job,
 * its pod Running and its redrive with it. Clients are therefore built on a daemon thread.
 */
final class Clients {
  /** How long a client call (a lookup, a subscription) may take. */
  static final int OPERATION_TIMEOUT_S = 30;
  /** How long a producer waits for the broker to store a message before the send fails. */
  static final int SEND_TIMEOUT_S = 30;
  /** How long a batching producer gathers messages before it sends them. */
  static final int BATCH_DELAY_MS = 5;

  private static final ConcurrentMap<String, PulsarClient> CLIENTS = new ConcurrentHashMap<>();
  private static final ConcurrentMap<String, Producer<byte[]>> PRODUCERS = new ConcurrentHashMap<>();

  private Clients() {
  }

  /**
   * Without the per-producer and per-consumer statistics (deprecated in Pulsar 4.0 for
   * OpenTelemetry, and still counted on every message unless the interval is 0).
   */
  @SuppressWarnings("deprecation")
  static PulsarClient client(Broker broker) {
    return CLIENTS.computeIfAbsent(broker.key(), key -> onDaemonThread(() -> {
      try {
        ClientBuilder builder = PulsarClient.builder()
            .serviceUrl(broker.serviceUrl())
            .operationTimeout(OPERATION_TIMEOUT_S, TimeUnit.SECONDS)
            .statsInterval(0, TimeUnit.SECONDS);
        ClientSettings.apply(builder, broker.clientDir());
        return builder.build();
      } catch (PulsarClientException | UncheckedIOException error) {
        throw PulsarConnectorException.of("cannot make a Pulsar client for " + broker.serviceUrl(), error);
      }
    }));
  }

  /** What {@code make} returns, made on a daemon thread of its own (the threads it starts are daemons too). */
  static <T> T onDaemonThread(Supplier<T> make) {
    AtomicReference<T> made = new AtomicReference<>();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Thread maker = new Thread(() -> {
      try {
        made.set(make.get());
      } catch (RuntimeException | Error error) {
        failed.set(error);
      }
    }, "spark-dlq-pulsar-client");
    maker.setDaemon(true);
    maker.start();
    try {
      maker.join();
    } catch (InterruptedException error) {
      throw PulsarConnectorException.of("making a Pulsar client", error);
    }
    Throwable error = failed.get();
    if (error instanceof Error fatal) {
      throw fatal;
    }
    if (error != null) {
      throw (RuntimeException) error;
    }
    return made.get();
  }

  /** The producer of {@code topic}, batching or not; a new one if the last lost its connection. */
  static Producer<byte[]> producer(Broker broker, String topic, boolean batching) {
    String key = broker.key() + " " + topic + " " + batching;
    return PRODUCERS.compute(key, (k, known) -> {
      if (known != null && known.isConnected()) {
        return known;
      }
      if (known != null) {
        known.closeAsync();
      }
      try {
        return client(broker).newProducer()
            .topic(topic)
            .enableBatching(batching)
            .batchingMaxPublishDelay(BATCH_DELAY_MS, TimeUnit.MILLISECONDS)
            .blockIfQueueFull(true)
            .sendTimeout(SEND_TIMEOUT_S, TimeUnit.SECONDS)
            .create();
      } catch (PulsarClientException error) {
        throw PulsarConnectorException.of("Pulsar topic '" + topic + "': cannot create a producer", error);
      }
    });
  }
}
