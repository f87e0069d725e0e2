package io.sparkdlq.bench.peers.connect;

import java.util.Collection;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * Publishes each record (key, value, headers as bytes) to the output topic with an acks=all,
 * idempotent producer. At-least-once: {@link #flush} waits for every send before the worker
 * commits the consumer offsets, and a failed send fails the task (at the next put or flush).
 *
 * <p>Prints {@code ASSIGNED <epoch ms>} on stdout when the task is given partitions (the
 * benchmark's start of the run).
 */
public class TopicSinkTask extends SinkTask {
  private KafkaProducer<byte[], byte[]> producer;
  private String topic;
  private final AtomicReference<Exception> failed = new AtomicReference<>();

  @Override
  public String version() {
    return "0";
  }

  @Override
  public void start(Map<String, String> props) {
    topic = props.get("output.topic");
    producer =
        new KafkaProducer<>(
            Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, props.get("output.bootstrap.servers"),
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.LINGER_MS_CONFIG, 5),
            new ByteArraySerializer(),
            new ByteArraySerializer());
  }

  @Override
  public void open(Collection<TopicPartition> partitions) {
    if (!partitions.isEmpty()) {
      System.out.println("ASSIGNED " + System.currentTimeMillis());
      System.out.flush();
    }
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    check();
    for (SinkRecord record : records) {
      RecordHeaders headers = new RecordHeaders();
      for (Header header : record.headers()) {
        if (header.value() instanceof byte[] value) {
          headers.add(header.key(), value);
        }
      }
      byte[] key = record.key() == null ? null : FailingProcessor.bytes(record.key());
      producer.send(
          new ProducerRecord<>(topic, null, key, FailingProcessor.bytes(record.value()), headers),
          (metadata, error) -> {
            if (error != null) {
              failed.compareAndSet(null, error);
            }
          });
    }
  }

  @Override
  public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
    producer.flush();
    check();
  }

  private void check() {
    Exception error = failed.get();
    if (error != null) {
      throw new ConnectException("the output topic did not take a record", error);
    }
  }

  @Override
  public void stop() {
    if (producer != null) {
      producer.close();
    }
  }
}
