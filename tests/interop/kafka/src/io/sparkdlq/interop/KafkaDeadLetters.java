package io.sparkdlq.interop;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.errors.internals.ExceptionHandlerUtils;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Writes dead letters with Apache Kafka's own libraries, for
 * tests/integration/engine/test_interop.py. One run takes several commands separated by
 * {@code --} (one JVM start for all) and prints one JSON object on stdout, an entry per command:
 *
 * <ul>
 *   <li>{@code names}: the header names of Kafka Streams' ExceptionHandlerUtils, from its
 *       constants.
 *   <li>{@code streams <bootstrap> <source> <dlq> <output> <expected>}: a Kafka Streams
 *       application reads {@code source} (String keys, Long values), fails the records whose
 *       value is no 8-byte long (deserialization: LogAndContinueExceptionHandler) or is negative
 *       (processing: LogAndContinueProcessingExceptionHandler), with {@code
 *       errors.dead.letter.queue.topic.name} set to {@code dlq}; it runs until {@code dlq} holds
 *       {@code expected} records.
 *   <li>{@code share-reject <bootstrap> <source> <dlq> <group> <count>}: makes {@code dlq} (its
 *       config {@code errors.deadletterqueue.group.enable}) the dead-letter topic of share group
 *       {@code group} (copying records), then a share consumer of that group rejects {@code
 *       count} records of {@code source}; it waits until the broker has copied them to {@code
 *       dlq}. Needs a broker with share groups' dead-letter queues (Kafka 4.4).
 * </ul>
 */
public final class KafkaDeadLetters {
  private static final Duration DEADLINE = Duration.ofSeconds(90);

  private KafkaDeadLetters() {}

  public static void main(String[] args) throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    List<String> command = new ArrayList<>();
    for (String arg : (String.join("\u0000", args) + "\u0000--").split("\u0000")) {
      if (!arg.equals("--")) {
        command.add(arg);
        continue;
      }
      if (!command.isEmpty()) {
        out.put(command.get(0), run(command));
      }
      command = new ArrayList<>();
    }
    System.out.println(json(out));
    System.exit(0);
  }

  private static Object run(List<String> a) throws Exception {
    return switch (a.get(0)) {
      case "names" -> names();
      case "streams" -> streams(a.get(1), a.get(2), a.get(3), a.get(4), Integer.parseInt(a.get(5)));
      case "share-reject" -> shareReject(a.get(1), a.get(2), a.get(3), a.get(4), Integer.parseInt(a.get(5)));
      default -> throw new IllegalArgumentException("unknown command " + a.get(0));
    };
  }

  private static Map<String, Object> names() {
    Map<String, Object> names = new LinkedHashMap<>();
    names.put("HEADER_ERRORS_EXCEPTION_NAME", ExceptionHandlerUtils.HEADER_ERRORS_EXCEPTION_NAME);
    names.put("HEADER_ERRORS_EXCEPTION_MESSAGE_NAME", ExceptionHandlerUtils.HEADER_ERRORS_EXCEPTION_MESSAGE_NAME);
    names.put("HEADER_ERRORS_STACKTRACE_NAME", ExceptionHandlerUtils.HEADER_ERRORS_STACKTRACE_NAME);
    names.put("HEADER_ERRORS_TOPIC_NAME", ExceptionHandlerUtils.HEADER_ERRORS_TOPIC_NAME);
    names.put("HEADER_ERRORS_PARTITION_NAME", ExceptionHandlerUtils.HEADER_ERRORS_PARTITION_NAME);
    names.put("HEADER_ERRORS_OFFSET_NAME", ExceptionHandlerUtils.HEADER_ERRORS_OFFSET_NAME);
    names.put("ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG", StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG);
    return names;
  }

  private static Map<String, Object> streams(String bootstrap, String source, String dlq, String output, int expected)
      throws Exception {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, "interop-" + UUID.randomUUID());
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("kafka-streams").toString());
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    props.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, LogAndContinueExceptionHandler.class);
    props.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG, LogAndContinueProcessingExceptionHandler.class);
    props.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, dlq);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(source, Consumed.with(Serdes.String(), Serdes.Long()))
        .mapValues(amount -> {
          if (amount < 0) {
            throw new IllegalArgumentException("negative amount " + amount);
          }
          return amount;
        })
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    long started = System.nanoTime();
    int written;
    try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
      streams.start();
      written = awaitRecords(bootstrap, dlq, expected);
    }
    return Map.of("deadLetters", written, "millis", (System.nanoTime() - started) / 1_000_000);
  }

  private static Map<String, Object> shareReject(String bootstrap, String source, String dlq, String group, int count)
      throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      NewTopic topic = new NewTopic(dlq, 1, (short) 1).configs(Map.of("errors.deadletterqueue.group.enable", "true"));
      admin.createTopics(List.of(topic)).all().get();
      ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
      List<AlterConfigOp> ops = List.of(
          set("share.auto.offset.reset", "earliest"),
          set("errors.deadletterqueue.topic.name", dlq),
          set("errors.deadletterqueue.copy.record.enable", "true"));
      admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
    }
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    int rejected = 0;
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
      consumer.subscribe(List.of(source));
      while (rejected < count && System.nanoTime() < deadline) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
          consumer.acknowledge(record, AcknowledgeType.REJECT);
          rejected++;
        }
        consumer.commitSync();
      }
    }
    if (rejected < count) {
      throw new IllegalStateException("rejected " + rejected + " of " + count + " records of " + source);
    }
    return Map.of("rejected", rejected, "deadLetters", awaitRecords(bootstrap, dlq, count));
  }

  private static AlterConfigOp set(String name, String value) {
    return new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET);
  }

  /** Reads {@code topic}'s first partition from the start until it holds {@code expected} records. */
  private static int awaitRecords(String bootstrap, String topic, int expected) {
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("bootstrap.servers", bootstrap);
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    int seen = 0;
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      TopicPartition partition = new TopicPartition(topic, 0);
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      while (seen < expected && System.nanoTime() < deadline) {
        seen += consumer.poll(Duration.ofMillis(200)).count();
      }
    }
    if (seen < expected) {
      throw new IllegalStateException("found " + seen + " of " + expected + " records on " + topic);
    }
    return seen;
  }

  private static String json(Object value) {
    if (value instanceof Map<?, ?> map) {
      List<String> entries = new ArrayList<>();
      map.forEach((k, v) -> entries.add(json(String.valueOf(k)) + ":" + json(v)));
      return "{" + String.join(",", entries) + "}";
    }
    if (value instanceof Number) {
      return value.toString();
    }
    StringBuilder text = new StringBuilder("\"");
    for (char c : String.valueOf(value).toCharArray()) {
      text.append(c == '"' || c == '\\' ? "\\" + c : c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
    }
    return text.append('"').toString();
  }
}
