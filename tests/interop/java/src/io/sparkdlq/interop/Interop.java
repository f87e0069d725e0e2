package io.sparkdlq.interop;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.runtime.ConnectMetrics;
import org.apache.kafka.connect.runtime.SinkConnectorConfig;
import org.apache.kafka.connect.runtime.errors.DeadLetterQueueReporter;
import org.apache.kafka.connect.runtime.errors.ErrorHandlingMetrics;
import org.apache.kafka.connect.runtime.errors.ProcessingContext;
import org.apache.kafka.connect.runtime.errors.Stage;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.pulsar.client.util.RetryMessageUtil;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.ListenerExecutionFailedException;
import org.springframework.kafka.retrytopic.RetryTopicHeaders;
import org.springframework.kafka.support.KafkaHeaders;

/**
 * Runs the real Spring for Apache Kafka and Kafka Connect classes against a broker, for
 * tests/integration/engine/test_interop.py. Each command prints JSON on stdout:
 *
 * <ul>
 *   <li>{@code names}: the header names of Spring's KafkaHeaders and RetryTopicHeaders, of
 *       Connect's DeadLetterQueueReporter and of Pulsar's RetryMessageUtil, from their constants.
 *   <li>{@code spring-read <bootstrap> <topic> <count>}: each record's dead-letter facts read the
 *       way Spring's DeadLetterPublishingRecoverer writes them (partition a 4-byte int, offset and
 *       timestamp 8-byte longs, retry timestamps BigInteger bytes, attempts a 4-byte int).
 *   <li>{@code spring-redeadletter <bootstrap> <topic> <count> <target> <group>}: a Spring
 *       DeadLetterPublishingRecoverer (original headers not appended) dead-letters each record of
 *       {@code topic} again, to {@code target}, as a Spring listener failing on it would; prints
 *       {@code spring-read} of the target.
 *   <li>{@code spring-publish <bootstrap> <source> <count> <target> <group>}: Spring's
 *       DeadLetterPublishingRecoverer dead-letters each source record to {@code target}.
 *   <li>{@code connect-publish <bootstrap> <source> <count> <target>}: Connect's
 *       DeadLetterQueueReporter (context headers on) reports each source record as failed in a
 *       sink task's put.
 * </ul>
 */
public final class Interop {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Interop() {}

  public static void main(String[] args) throws Exception {
    Object out =
        switch (args[0]) {
          case "names" -> names();
          case "spring-read" -> springRead(args[1], args[2], Integer.parseInt(args[3]));
          case "spring-redeadletter" -> {
            springPublish(args[1], args[2], Integer.parseInt(args[3]), args[4], args[5], false);
            yield springRead(args[1], args[4], Integer.parseInt(args[3]));
          }
          case "spring-publish" -> {
            springPublish(args[1], args[2], Integer.parseInt(args[3]), args[4], args[5], true);
            yield Map.of("published", Integer.parseInt(args[3]));
          }
          case "connect-publish" -> {
            connectPublish(args[1], args[2], Integer.parseInt(args[3]), args[4]);
            yield Map.of("published", Integer.parseInt(args[3]));
          }
          default -> throw new IllegalArgumentException("unknown command " + args[0]);
        };
    System.out.println(JSON.writeValueAsString(out));
    System.exit(0);
  }

  // RetryMessageUtil.SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID (the misspelt key) is deprecated in
  // Pulsar 4.0; the Java client still writes it on its dead letters.
  @SuppressWarnings("deprecation")
  private static Map<String, Object> names() {
    Map<String, Object> spring = new LinkedHashMap<>();
    spring.put("DLT_ORIGINAL_TOPIC", KafkaHeaders.DLT_ORIGINAL_TOPIC);
    spring.put("DLT_ORIGINAL_PARTITION", KafkaHeaders.DLT_ORIGINAL_PARTITION);
    spring.put("DLT_ORIGINAL_OFFSET", KafkaHeaders.DLT_ORIGINAL_OFFSET);
    spring.put("DLT_ORIGINAL_TIMESTAMP", KafkaHeaders.DLT_ORIGINAL_TIMESTAMP);
    spring.put("DLT_ORIGINAL_CONSUMER_GROUP", KafkaHeaders.DLT_ORIGINAL_CONSUMER_GROUP);
    spring.put("DLT_EXCEPTION_FQCN", KafkaHeaders.DLT_EXCEPTION_FQCN);
    spring.put("DLT_EXCEPTION_CAUSE_FQCN", KafkaHeaders.DLT_EXCEPTION_CAUSE_FQCN);
    spring.put("DLT_EXCEPTION_MESSAGE", KafkaHeaders.DLT_EXCEPTION_MESSAGE);
    spring.put("DLT_EXCEPTION_STACKTRACE", KafkaHeaders.DLT_EXCEPTION_STACKTRACE);
    spring.put("DEFAULT_HEADER_ATTEMPTS", RetryTopicHeaders.DEFAULT_HEADER_ATTEMPTS);
    spring.put("DEFAULT_HEADER_BACKOFF_TIMESTAMP", RetryTopicHeaders.DEFAULT_HEADER_BACKOFF_TIMESTAMP);
    spring.put("DEFAULT_HEADER_ORIGINAL_TIMESTAMP", RetryTopicHeaders.DEFAULT_HEADER_ORIGINAL_TIMESTAMP);
    Map<String, Object> connect = new LinkedHashMap<>();
    connect.put("ERROR_HEADER_ORIG_TOPIC", DeadLetterQueueReporter.ERROR_HEADER_ORIG_TOPIC);
    connect.put("ERROR_HEADER_ORIG_PARTITION", DeadLetterQueueReporter.ERROR_HEADER_ORIG_PARTITION);
    connect.put("ERROR_HEADER_ORIG_OFFSET", DeadLetterQueueReporter.ERROR_HEADER_ORIG_OFFSET);
    connect.put("ERROR_HEADER_CONNECTOR_NAME", DeadLetterQueueReporter.ERROR_HEADER_CONNECTOR_NAME);
    connect.put("ERROR_HEADER_EXCEPTION", DeadLetterQueueReporter.ERROR_HEADER_EXCEPTION);
    connect.put(
        "ERROR_HEADER_EXCEPTION_MESSAGE", DeadLetterQueueReporter.ERROR_HEADER_EXCEPTION_MESSAGE);
    connect.put(
        "ERROR_HEADER_EXCEPTION_STACK_TRACE",
        DeadLetterQueueReporter.ERROR_HEADER_EXCEPTION_STACK_TRACE);
    Map<String, Object> pulsar = new LinkedHashMap<>();
    pulsar.put("SYSTEM_PROPERTY_REAL_TOPIC", RetryMessageUtil.SYSTEM_PROPERTY_REAL_TOPIC);
    pulsar.put("SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID", RetryMessageUtil.SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID);
    pulsar.put("PROPERTY_ORIGIN_MESSAGE_ID", RetryMessageUtil.PROPERTY_ORIGIN_MESSAGE_ID);
    pulsar.put("SYSTEM_PROPERTY_RECONSUMETIMES", RetryMessageUtil.SYSTEM_PROPERTY_RECONSUMETIMES);
    pulsar.put("SYSTEM_PROPERTY_DELAY_TIME", RetryMessageUtil.SYSTEM_PROPERTY_DELAY_TIME);
    pulsar.put("SYSTEM_PROPERTY_RETRY_TOPIC", RetryMessageUtil.SYSTEM_PROPERTY_RETRY_TOPIC);
    return Map.of("spring", spring, "connect", connect, "pulsar", pulsar);
  }

  private static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, int count, String group) {
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put("enable.auto.commit", "false");
    props.put("auto.offset.reset", "earliest");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + 60_000;
      while (records.size() < count && System.currentTimeMillis() < deadline) {
        consumer.poll(Duration.ofMillis(500)).forEach(records::add);
      }
    }
    if (records.size() < count) {
      throw new IllegalStateException("read " + records.size() + " of " + count + " records from " + topic);
    }
    return records;
  }

  private static List<Map<String, Object>> springRead(String bootstrap, String topic, int count) {
    List<Map<String, Object>> rows = new ArrayList<>();
    for (ConsumerRecord<byte[], byte[]> record : readAll(bootstrap, topic, count, "interop-" + UUID.randomUUID())) {
      Headers headers = record.headers();
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("key", text(record.key()));
      row.put("topic", text(last(headers, KafkaHeaders.DLT_ORIGINAL_TOPIC)));
      row.put("partition", ByteBuffer.wrap(last(headers, KafkaHeaders.DLT_ORIGINAL_PARTITION)).getInt());
      row.put("offset", ByteBuffer.wrap(last(headers, KafkaHeaders.DLT_ORIGINAL_OFFSET)).getLong());
      row.put("timestamp", ByteBuffer.wrap(last(headers, KafkaHeaders.DLT_ORIGINAL_TIMESTAMP)).getLong());
      row.put("group", text(last(headers, KafkaHeaders.DLT_ORIGINAL_CONSUMER_GROUP)));
      row.put("fqcn", text(last(headers, KafkaHeaders.DLT_EXCEPTION_FQCN)));
      row.put("cause_fqcn", text(last(headers, KafkaHeaders.DLT_EXCEPTION_CAUSE_FQCN)));
      row.put("message", text(last(headers, KafkaHeaders.DLT_EXCEPTION_MESSAGE)));
      byte[] attempts = last(headers, RetryTopicHeaders.DEFAULT_HEADER_ATTEMPTS);
      row.put("attempts", attempts == null ? null : ByteBuffer.wrap(attempts).getInt());
      byte[] due = last(headers, RetryTopicHeaders.DEFAULT_HEADER_BACKOFF_TIMESTAMP);
      row.put("backoff_timestamp", due == null ? null : new BigInteger(due).longValue());
      Map<String, Integer> counts = new LinkedHashMap<>();
      Map<String, Integer> lengths = new LinkedHashMap<>();
      for (Header header : headers) {
        counts.merge(header.key(), 1, Integer::sum);
        lengths.put(header.key(), header.value() == null ? -1 : header.value().length);
      }
      row.put("counts", counts);
      row.put("lengths", lengths);
      rows.add(row);
    }
    return rows;
  }

  private static void springPublish(
      String bootstrap, String source, int count, String target, String group, boolean appendOriginal)
      throws Exception {
    Map<String, Object> producer = new LinkedHashMap<>();
    producer.put("bootstrap.servers", bootstrap);
    producer.put("key.serializer", ByteArraySerializer.class.getName());
    producer.put("value.serializer", ByteArraySerializer.class.getName());
    DefaultKafkaProducerFactory<byte[], byte[]> factory = new DefaultKafkaProducerFactory<>(producer);
    KafkaTemplate<byte[], byte[]> template = new KafkaTemplate<>(factory);
    DeadLetterPublishingRecoverer recoverer =
        new DeadLetterPublishingRecoverer(template, (record, error) -> new TopicPartition(target, -1));
    recoverer.setAppendOriginalHeaders(appendOriginal);
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put("auto.offset.reset", "earliest");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(source));
      int done = 0;
      long deadline = System.currentTimeMillis() + 60_000;
      while (done < count && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
          // As a listener container hands it over: the listener's error wrapped with the group.
          Exception failure =
              new ListenerExecutionFailedException(
                  "listener failed", group, new IllegalStateException("spring listener failed at " + record.offset()));
          recoverer.accept(record, consumer, failure);
          done++;
        }
      }
      if (done < count) {
        throw new IllegalStateException("dead-lettered " + done + " of " + count + " records of " + source);
      }
    }
    factory.destroy();
  }

  private static void connectPublish(String bootstrap, String source, int count, String target) throws Exception {
    Map<String, String> connector = new LinkedHashMap<>();
    connector.put("name", "orders-sink");
    connector.put("connector.class", "io.sparkdlq.interop.OrdersSink");
    connector.put("topics", source);
    connector.put("errors.tolerance", "all");
    connector.put("errors.deadletterqueue.topic.name", target);
    connector.put("errors.deadletterqueue.topic.replication.factor", "1");
    connector.put("errors.deadletterqueue.context.headers.enable", "true");
    SinkConnectorConfig sinkConfig = new SinkConnectorConfig(null, connector);
    Map<String, String> worker = new LinkedHashMap<>();
    worker.put("bootstrap.servers", bootstrap);
    worker.put("key.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
    worker.put("value.converter", "org.apache.kafka.connect.converters.ByteArrayConverter");
    worker.put(
        "offset.storage.file.filename", Files.createTempFile("interop", ".offsets").toString());
    ConnectMetrics metrics = new ConnectMetrics("interop", new StandaloneConfig(worker), Time.SYSTEM, "interop");
    ConnectorTaskId task = new ConnectorTaskId("orders-sink", 0);
    Map<String, Object> producer = new LinkedHashMap<>();
    producer.put("bootstrap.servers", bootstrap);
    producer.put("key.serializer", ByteArraySerializer.class.getName());
    producer.put("value.serializer", ByteArraySerializer.class.getName());
    DeadLetterQueueReporter reporter =
        DeadLetterQueueReporter.createAndSetup(
            Map.of("bootstrap.servers", bootstrap), task, sinkConfig, producer, new ErrorHandlingMetrics(task, metrics));
    for (ConsumerRecord<byte[], byte[]> record : readAll(bootstrap, source, count, "interop-" + UUID.randomUUID())) {
      ProcessingContext<ConsumerRecord<byte[], byte[]>> context = new ProcessingContext<>(record);
      context.currentContext(Stage.TASK_PUT, Interop.class);
      context.error(new DataException("sink put failed at " + record.offset()));
      reporter.report(context).get();
    }
    reporter.close();
    metrics.stop();
  }

  private static byte[] last(Headers headers, String name) {
    Header header = headers.lastHeader(name);
    return header == null ? null : header.value();
  }

  private static String text(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
  }
}
