package io.sparkdlq.bench.peers.connect;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * The benchmark's processor as a single message transform. A value starts with a four-digit
 * bucket (bench/common.py): below {@code transient} the first call for a record fails with a
 * {@link RetriableException}, which the worker retries in place (errors.retry.timeout) and the
 * retry succeeds; below {@code poison} every call fails with a {@link DataException}, which the
 * worker does not retry and, with errors.tolerance=all, writes to the dead-letter queue; any
 * other record passes unchanged.
 *
 * <p>Invariant: a record's "already failed once" mark lives in {@code failedOnce} from its first
 * failure to its retry's success, so the set holds at most the records being retried (one per
 * task, as the worker retries in place before it moves on).
 */
public class FailingProcessor<R extends ConnectRecord<R>> implements Transformation<R> {
  private static final ConfigDef CONFIG =
      new ConfigDef()
          .define("transient", ConfigDef.Type.INT, 0, ConfigDef.Importance.HIGH,
              "buckets below this fail once (retriable)")
          .define("poison", ConfigDef.Type.INT, 0, ConfigDef.Importance.HIGH,
              "buckets below this (and not transient) always fail (not retriable)");

  private int transientBelow;
  private int poisonBelow;
  private final Set<String> failedOnce = new HashSet<>();

  @Override
  public void configure(Map<String, ?> configs) {
    Map<String, Object> parsed = CONFIG.parse(configs);
    transientBelow = (Integer) parsed.get("transient");
    poisonBelow = (Integer) parsed.get("poison");
  }

  static byte[] bytes(Object value) {
    if (value instanceof byte[] array) {
      return array;
    }
    if (value instanceof ByteBuffer buffer) {
      byte[] array = new byte[buffer.remaining()];
      buffer.duplicate().get(array);
      return array;
    }
    throw new DataException("expected a byte-array value, got " + (value == null ? "null" : value.getClass()));
  }

  static int bucket(byte[] value) {
    if (value.length < 4) {
      return 0;
    }
    return Integer.parseInt(new String(value, 0, 4, StandardCharsets.US_ASCII));
  }

  @Override
  public R apply(R record) {
    int b = bucket(bytes(record.value()));
    if (b < transientBelow) {
      String id = record.topic() + "/" + record.kafkaPartition() + "/" + record.key() + "/" + record.timestamp();
      if (failedOnce.add(id)) {
        throw new RetriableException("transient failure");
      }
      failedOnce.remove(id);
    } else if (b < poisonBelow) {
      throw new DataException("poison message");
    }
    return record;
  }

  @Override
  public ConfigDef config() {
    return CONFIG;
  }

  @Override
  public void close() {}
}
