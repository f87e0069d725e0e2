package io.sparkdlq.interop;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * A consumer of Apache Pulsar's Java client with its own retry and dead-letter handling, run by
 * tests/integration/engine/test_pulsar_interop.py against the engine's topics:
 *
 * <pre>
 *   PulsarRetry SERVICE_URL TOPIC SUBSCRIPTION RETRY_TOPIC DLQ_TOPIC MAX_REDELIVER LETTERS TIMEOUT_S
 * </pre>
 *
 * It subscribes TOPIC with {@code enableRetry(true)} and a {@link DeadLetterPolicy} naming the
 * engine's retry and dead-letter topics, so the client consumes the retry topic too. Each message
 * from TOPIC is handed back with {@code reconsumeLater(message, 500 ms)}: the client writes its
 * retry letter to RETRY_TOPIC. Each message from the retry topic is printed and acknowledged.
 * It stops once it has reconsumed every message of TOPIC it got and printed LETTERS letters
 * from the retry topic whose value is not one it reconsumed itself, or after TIMEOUT_S. One JSON
 * object a line: {"topic", "key", "value", "receivedAt", "redeliveryCount", "properties", "action"}.
 */
public final class PulsarRetry {
  private PulsarRetry() {}

  public static void main(String[] args) throws Exception {
    String serviceUrl = args[0];
    String topic = args[1];
    String subscription = args[2];
    String retryTopic = args[3];
    String dlqTopic = args[4];
    int maxRedeliver = Integer.parseInt(args[5]);
    int letters = Integer.parseInt(args[6]);
    long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(args[7]);
    try (PulsarClient client = PulsarClient.builder().serviceUrl(serviceUrl).build();
        Consumer<byte[]> consumer =
            client
                .newConsumer()
                .topic(topic)
                .subscriptionName(subscription)
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableRetry(true)
                .deadLetterPolicy(
                    DeadLetterPolicy.builder()
                        .maxRedeliverCount(maxRedeliver)
                        .retryLetterTopic(retryTopic)
                        .deadLetterTopic(dlqTopic)
                        .build())
                .subscribe()) {
      java.util.Set<String> reconsumed = new java.util.HashSet<>();
      int seen = 0;
      boolean reconsumedSome = false;
      while (System.currentTimeMillis() < deadline && (seen < letters || !reconsumedSome)) {
        Message<byte[]> message = consumer.receive(1, TimeUnit.SECONDS);
        if (message == null) {
          continue;
        }
        String value = new String(message.getValue(), java.nio.charset.StandardCharsets.UTF_8);
        boolean fromRetry = message.getTopicName().startsWith(fullName(retryTopic));
        String action;
        if (fromRetry) {
          consumer.acknowledge(message);
          action = "acknowledged";
          if (!reconsumed.contains(value)) {
            seen++;
          }
        } else {
          consumer.reconsumeLater(message, 500, TimeUnit.MILLISECONDS);
          reconsumed.add(value);
          reconsumedSome = true;
          action = "reconsumeLater";
        }
        System.out.println(json(message, value, action));
        System.out.flush();
      }
    }
  }

  private static String fullName(String topic) {
    return topic.contains("://") ? topic : "persistent://public/default/" + topic;
  }

  private static String json(Message<byte[]> message, String value, String action) {
    StringBuilder out = new StringBuilder("{");
    field(out, "topic", message.getTopicName()).append(',');
    field(out, "key", message.hasKey() ? message.getKey() : "").append(',');
    field(out, "value", value).append(',');
    out.append("\"receivedAt\":").append(System.currentTimeMillis()).append(',');
    out.append("\"redeliveryCount\":").append(message.getRedeliveryCount()).append(',');
    field(out, "action", action).append(",\"properties\":{");
    Map<String, String> properties = new TreeMap<>(message.getProperties());
    boolean first = true;
    for (Map.Entry<String, String> entry : properties.entrySet()) {
      if (!first) {
        out.append(',');
      }
      first = false;
      field(out, entry.getKey(), entry.getValue());
    }
    return out.append("}}").toString();
  }

  private static StringBuilder field(StringBuilder out, String name, String value) {
    return out.append(quote(name)).append(':').append(quote(value));
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
