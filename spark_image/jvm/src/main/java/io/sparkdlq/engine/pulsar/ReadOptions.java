package io.sparkdlq.engine.pulsar;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The options of a read: the broker ({@code serviceUrl}, {@code clientDir}: {@link Broker}), the
 * {@code topic} as the policy names it (the rows' {@code topic}). A stream's: the durable {@code
 * subscription}, {@code startingOffsets} ({@code earliest} or {@code latest}, for a query without a
 * checkpoint) and {@code maxEntriesPerTrigger} (entries per micro-batch over all partitions; 0: no
 * limit). A batch read's ({@link PulsarBatch}): {@code startingPositions} and {@code
 * endingPositions}, each partition's position in {@link PulsarOffset}'s layout, the messages after
 * the first up to the second read.
 */
record ReadOptions(Broker broker, String topic, String subscription, boolean earliest, long maxEntries,
    String startingPositions, String endingPositions) implements Serializable {

  static ReadOptions of(CaseInsensitiveStringMap options) {
    List<String> missing = new ArrayList<>();
    for (String name : List.of("serviceUrl", "topic")) {
      String value = options.get(name);
      if (value == null || value.isBlank()) {
        missing.add(name);
      }
    }
    if (!missing.isEmpty()) {
      throw new IllegalArgumentException(
          PulsarDataSource.NAME + ": missing option(s) " + String.join(", ", missing));
    }
    String starting = options.getOrDefault("startingOffsets", "latest");
    if (!starting.equals("earliest") && !starting.equals("latest")) {
      throw new IllegalArgumentException(
          PulsarDataSource.NAME + ": startingOffsets must be earliest or latest, not '" + starting + "'");
    }
    String limit = options.getOrDefault("maxEntriesPerTrigger", "0");
    long maxEntries;
    try {
      maxEntries = limit.isBlank() ? 0 : Long.parseLong(limit.trim());
    } catch (NumberFormatException error) {
      throw new IllegalArgumentException(
          PulsarDataSource.NAME + ": maxEntriesPerTrigger must be a whole number, not '" + limit + "'", error);
    }
    if (maxEntries < 0) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": maxEntriesPerTrigger must be 0 or more");
    }
    Broker broker = new Broker(options.get("serviceUrl"), options.getOrDefault(Broker.CLIENT_DIR_OPTION, ""));
    return new ReadOptions(broker, options.get("topic"), options.getOrDefault("subscription", ""),
        starting.equals("earliest"), maxEntries, options.getOrDefault("startingPositions", "{}"),
        options.getOrDefault("endingPositions", ""));
  }
}
