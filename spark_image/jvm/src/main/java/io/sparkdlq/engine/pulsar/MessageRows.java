package io.sparkdlq.engine.pulsar;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rows a read gives, with the Kafka source's columns: {@code key} (the partition key's
 * bytes, null when the message has none), {@code value}, {@code headers} (the properties, values
 * UTF-8), {@code topic} (as the options name it), {@code partition} (-1 for a non-partitioned
 * topic), {@code offset} (the message id packed into a long, {@link #offset}) and {@code
 * timestamp} (the publish time).
 */
final class MessageRows {
  static final StructType HEADER = new StructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.StringType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true),
  });
  static final StructType SCHEMA = new StructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.BinaryType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true),
      DataTypes.createStructField("headers", DataTypes.createArrayType(HEADER, true), true),
      DataTypes.createStructField("topic", DataTypes.StringType, true),
      DataTypes.createStructField("partition", DataTypes.IntegerType, true),
      DataTypes.createStructField("offset", DataTypes.LongType, true),
      DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
  });

  /**
   * The bits of the packed offset (dlq_engine.routing.headers keeps the same layout): ledger ids
   * below 2^31, entry ids below 2^20, batch indexes below 2^12. Packed ids order as message ids.
   */
  static final int LEDGER_BITS = 31;
  static final int ENTRY_BITS = 20;
  static final int BATCH_BITS = 12;

  private MessageRows() {
  }

  static InternalRow row(UTF8String topic, int partition, Message<byte[]> message) {
    MessageIdAdv id = (MessageIdAdv) message.getMessageId();
    Map<String, String> properties = new TreeMap<>(message.getProperties());
    Object[] headers = new Object[properties.size()];
    int at = 0;
    for (Map.Entry<String, String> property : properties.entrySet()) {
      headers[at++] = new GenericInternalRow(new Object[] {
          UTF8String.fromString(property.getKey()), property.getValue().getBytes(StandardCharsets.UTF_8)});
    }
    return new GenericInternalRow(new Object[] {
        message.hasKey() ? message.getKeyBytes() : null,
        message.getData(),
        new GenericArrayData(headers),
        topic,
        partition,
        offset(id.getLedgerId(), id.getEntryId(), id.getBatchIndex()),
        message.getPublishTime() * 1000L,
    });
  }

  /** The {@code offset} of a message id; one out of range fails the batch with an error naming it. */
  static long offset(long ledger, long entry, int batchIndex) {
    long batch = Math.max(batchIndex, 0);
    if (ledger < 0 || ledger >= 1L << LEDGER_BITS || entry < 0 || entry >= 1L << ENTRY_BITS
        || batch >= 1L << BATCH_BITS) {
      throw new IllegalArgumentException("Pulsar message id " + ledger + ":" + entry + ":" + batchIndex
          + " does not fit the engine's offsets (ledger below 2^" + LEDGER_BITS + ", entry below 2^" + ENTRY_BITS
          + ", batch index below 2^" + BATCH_BITS + ")");
    }
    return (ledger << (ENTRY_BITS + BATCH_BITS)) | (entry << BATCH_BITS) | batch;
  }
}
