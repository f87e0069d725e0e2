package io.sparkdlq.engine.pulsar;

import java.io.Serializable;
import java.util.Arrays;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of a write: the broker ({@code serviceUrl}, {@code clientDir}: {@link Broker});
 * the topics written without producer batching ({@code unbatchedTopics}, comma-separated); the topics whose messages with the
 * property named by {@code deliverAtProperty} (epoch ms) are sent with Pulsar's delayed
 * delivery at that time ({@code delayedTopics}). Topics are compared as the rows name them.
 */
record WriteOptions(Broker broker, Set<String> unbatched, Set<String> delayed, String deliverAtProperty)
    implements Serializable {

  static WriteOptions of(CaseInsensitiveStringMap options) {
    String serviceUrl = options.get("serviceUrl");
    if (serviceUrl == null || serviceUrl.isBlank()) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": missing option serviceUrl");
    }
    Set<String> delayed = names(options.getOrDefault("delayedTopics", ""));
    String deliverAt = options.getOrDefault("deliverAtProperty", "");
    if (!delayed.isEmpty() && deliverAt.isBlank()) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": delayedTopics needs deliverAtProperty");
    }
    Broker broker = new Broker(serviceUrl, options.getOrDefault(Broker.CLIENT_DIR_OPTION, ""));
    return new WriteOptions(broker, names(options.getOrDefault("unbatchedTopics", "")), delayed, deliverAt);
  }

  private static Set<String> names(String list) {
    return Arrays.stream(list.split(",")).map(String::trim).filter(name -> !name.isEmpty())
        .collect(Collectors.toUnmodifiableSet());
  }
}
