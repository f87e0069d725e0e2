package io.sparkdlq.engine.pulsar;

import java.io.Serializable;
import java.util.Arrays;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of a write: the broker ({@code serviceUrl}); the topics written without producer
 * batching ({@code unbatchedTopics}, comma-separated); the topics whose messages with the
 * property named by {@code deliverAtProperty} (epoch ms) are sent with Pulsar's delayed
 * delivery at that time ({@code delayedTopics}). Topics are compared as the rows name them.
 */
record WriteOptions(String serviceUrl, Set<String> unbatched, Set<String> delayed, String deliverAtProperty)
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
    return new WriteOptions(serviceUrl, names(options.getOrDefault("unbatchedTopics", "")), delayed, deliverAt);
  }

  private static Set<String> names(String list) {
    return Arrays.stream(list.split(",")).map(String::trim).filter(name -> !name.isEmpty())
        .collect(Collectors.toUnmodifiableSet());
  }
}
