package io.sparkdlq.bench.peers.spring;

import java.util.HashMap;
import java.util.Map;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.env.MapPropertySource;

/**
 * The Spring Kafka peer of the throughput benchmark: a {@code @KafkaListener} with
 * {@code @RetryableTopic} (see {@link Listener}) in a plain Spring context, no Boot.
 *
 * <p>Arguments are {@code name=value} pairs that become the {@code peer.*} properties:
 * {@code bootstrap}, {@code source}, {@code output}, {@code run} (a suffix for the group and the
 * retry and dead-letter topics), {@code partitions} (consumer threads and the retry topic's
 * partitions), {@code attempts}, {@code backoff-ms}, {@code transient} and {@code poison} (the
 * failure mix's bucket bounds), {@code n} (source messages, for the first-pass line), and
 * optionally {@code seek-after-error} (true or false, see {@link PeerConfig}).
 *
 * <p>Lines on stdout, for the benchmark: {@code ASSIGNED <epoch ms>} when a source partition is
 * assigned, {@code FIRST_PASS <epoch ms>} when the n-th source message has had its first
 * delivery. It runs until it is stopped (SIGTERM closes the context).
 */
public final class SpringPeer {
  private SpringPeer() {}

  public static void main(String[] args) {
    Map<String, Object> properties = new HashMap<>();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("expected name=value, got: " + arg);
      }
      properties.put("peer." + arg.substring(0, eq), arg.substring(eq + 1));
    }
    for (String required :
        new String[] {"bootstrap", "source", "output", "run", "partitions", "attempts",
                      "backoff-ms", "transient", "poison", "n"}) {
      if (!properties.containsKey("peer." + required)) {
        throw new IllegalArgumentException("missing argument: " + required + "=...");
      }
    }
    AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
    context.getEnvironment().getPropertySources().addFirst(new MapPropertySource("peer", properties));
    context.register(PeerConfig.class, Listener.class);
    context.registerShutdownHook();
    context.refresh();
  }
}
