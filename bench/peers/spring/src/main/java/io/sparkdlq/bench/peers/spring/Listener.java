package io.sparkdlq.bench.peers.spring;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.kafka.annotation.BackOff;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.annotation.RetryableTopic;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.retrytopic.SameIntervalTopicReuseStrategy;
import org.springframework.stereotype.Component;

/**
 * The benchmark's processor as a Spring Kafka listener. A source value starts with a four-digit
 * bucket (bench/common.py): below {@code transient} it fails on the first delivery (from the
 * source topic) and succeeds on a retry; below {@code poison} it always fails with {@link
 * Poison}, which is excluded from retries and so goes straight to the dead-letter topic; every
 * other value, and a transient one on its retry, is published unchanged to the output topic.
 *
 * <p>Retries: a single retry topic with a fixed back-off ({@code SINGLE_TOPIC} reuse of the
 * same interval), {@code attempts} deliveries in all, then the dead-letter topic; the retry
 * and dead-letter topics are named after the source with the run's suffix, and created by
 * Spring with the source's partition count.
 */
@Component
public class Listener {
  private final KafkaTemplate<byte[], byte[]> template;
  private final String source;
  private final String output;
  private final int transientBelow;
  private final int poisonBelow;
  private final long n;
  private final AtomicLong firstDeliveries = new AtomicLong();

  public Listener(
      KafkaTemplate<byte[], byte[]> template,
      @Value("${peer.source}") String source,
      @Value("${peer.output}") String output,
      @Value("${peer.transient}") int transientBelow,
      @Value("${peer.poison}") int poisonBelow,
      @Value("${peer.n}") long n) {
    this.template = template;
    this.source = source;
    this.output = output;
    this.transientBelow = transientBelow;
    this.poisonBelow = poisonBelow;
    this.n = n;
  }

  /** Always fails: the non-retryable failure of the mix. */
  public static final class Poison extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public Poison() {
      super("poison message");
    }
  }

  /** Fails on the first delivery only: the retryable failure of the mix. */
  public static final class TransientFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public TransientFailure() {
      super("transient failure");
    }
  }

  static int bucket(byte[] value) {
    if (value == null || value.length < 4) {
      return 0;
    }
    return Integer.parseInt(new String(value, 0, 4, StandardCharsets.US_ASCII));
  }

  @RetryableTopic(
      attempts = "${peer.attempts}",
      backOff = @BackOff(delayString = "${peer.backoff-ms}"),
      sameIntervalTopicReuseStrategy = SameIntervalTopicReuseStrategy.SINGLE_TOPIC,
      retryTopicSuffix = "-retry-${peer.run}",
      dltTopicSuffix = "-dlt-${peer.run}",
      numPartitions = "${peer.partitions}",
      replicationFactor = "1",
      exclude = Poison.class,
      autoStartDltHandler = "false")
  @KafkaListener(id = "peer-${peer.run}", topics = "${peer.source}", groupId = "spring-peer-${peer.run}")
  public void listen(ConsumerRecord<byte[], byte[]> record) {
    boolean first = record.topic().equals(source);
    try {
      int b = bucket(record.value());
      if (b < transientBelow) {
        if (first) {
          throw new TransientFailure();
        }
      } else if (b < poisonBelow) {
        throw new Poison();
      }
      template.send(new ProducerRecord<>(output, null, record.key(), record.value(), record.headers()));
    } finally {
      if (first && firstDeliveries.incrementAndGet() == n) {
        System.out.println("FIRST_PASS " + System.currentTimeMillis());
        System.out.flush();
      }
    }
  }
}
