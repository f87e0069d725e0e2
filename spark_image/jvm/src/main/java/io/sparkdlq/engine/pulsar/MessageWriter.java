package io.sparkdlq.engine.pulsar;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * One task's writes: each row is sent asynchronously to its {@code topic}, and {@link #commit}
 * returns once the broker has stored every one of them, or fails with the first failure.
 *
 * <p>A message carries the row's {@code key} as its partition key (as bytes, base64 on the wire,
 * when the key is not UTF-8: the Java client hands such a key back as the same bytes), its
 * {@code value}, and its {@code headers} as properties: Pulsar's properties are strings, so a
 * header value that is not UTF-8 is written with U+FFFD in place of what is not. On the topics
 * named by {@code delayedTopics} a message with the {@code deliverAtProperty} property is sent
 * with Pulsar's delayed delivery at that time.
 */
final class MessageWriter implements DataWriter<InternalRow> {
  /** The longest a commit waits for receipts beyond the producers' own send timeout. */
  private static final long RECEIPT_GRACE_MS = 30_000;

  private final WriteOptions options;
  private final Columns columns;
  private final Map<String, Producer<byte[]>> producers = new HashMap<>();
  private final Object receipts = new Object();
  private long sent;
  private long pending;
  private long failed;
  private String firstFailure;

  MessageWriter(WriteOptions options, Columns columns) {
    this.options = options;
    this.columns = columns;
  }

  @Override
  public void write(InternalRow row) {
    checkFailures();
    if (row.isNullAt(columns.topic())) {
      throw new PulsarConnectorException(PulsarDataSource.NAME + ": a row to write has no topic");
    }
    String topic = row.getUTF8String(columns.topic()).toString();
    Producer<byte[]> producer = producers.computeIfAbsent(topic,
        name -> Clients.producer(options.broker(), name, !options.unbatched().contains(name)));
    TypedMessageBuilder<byte[]> message = producer.newMessage()
        .value(row.isNullAt(columns.value()) ? new byte[0] : row.getBinary(columns.value()));
    if (columns.key() >= 0 && !row.isNullAt(columns.key())) {
      byte[] key = row.getBinary(columns.key());
      String text = utf8(key);
      if (text != null) {
        message.key(text);
      } else {
        message.keyBytes(key);
      }
    }
    Map<String, String> properties = properties(row);
    if (!properties.isEmpty()) {
      message.properties(properties);
    }
    if (options.delayed().contains(topic)) {
      String deliverAt = properties.get(options.deliverAtProperty());
      if (deliverAt != null) {
        try {
          message.deliverAt(Long.parseLong(deliverAt.trim()));
        } catch (NumberFormatException unreadable) {
          // sent at once: the engine's own delay stage still holds it until it is due
        }
      }
    }
    synchronized (receipts) {
      pending++;
      sent++;
    }
    message.sendAsync().whenComplete((id, error) -> {
      synchronized (receipts) {
        pending--;
        if (error != null) {
          failed++;
          if (firstFailure == null) {
            firstFailure = topic + ": " + PulsarConnectorException.describe(error);
          }
        }
        receipts.notifyAll();
      }
    });
  }

  private Map<String, String> properties(InternalRow row) {
    Map<String, String> properties = new LinkedHashMap<>();
    if (columns.headers() < 0 || row.isNullAt(columns.headers())) {
      return properties;
    }
    ArrayData headers = row.getArray(columns.headers());
    for (int i = 0; i < headers.numElements(); i++) {
      if (headers.isNullAt(i)) {
        continue;
      }
      InternalRow header = headers.getStruct(i, 2);
      if (header.isNullAt(0)) {
        continue;
      }
      String value = header.isNullAt(1) ? "" : new String(header.getBinary(1), StandardCharsets.UTF_8);
      properties.put(header.getUTF8String(0).toString(), value);
    }
    return properties;
  }

  /** The bytes as text when they are UTF-8, else null. */
  private static String utf8(byte[] bytes) {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes))
          .toString();
    } catch (CharacterCodingException notText) {
      return null;
    }
  }

  private void checkFailures() {
    synchronized (receipts) {
      if (firstFailure != null) {
        throw new PulsarConnectorException(
            "Pulsar write failed for " + failed + " message(s), first: " + firstFailure);
      }
    }
  }

  /** Waits until the broker has stored every message this task sent. */
  @Override
  public WriterCommitMessage commit() {
    long deadline = System.nanoTime()
        + TimeUnit.MILLISECONDS.toNanos(TimeUnit.SECONDS.toMillis(Clients.SEND_TIMEOUT_S) + RECEIPT_GRACE_MS);
    synchronized (receipts) {
      while (pending > 0 && firstFailure == null) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (left <= 0) {
          throw new PulsarConnectorException("Pulsar write: " + pending + " of " + sent
              + " message(s) without a receipt from the broker after " + Clients.SEND_TIMEOUT_S + " s");
        }
        try {
          receipts.wait(left);
        } catch (InterruptedException error) {
          throw PulsarConnectorException.of("waiting for Pulsar's receipts", error);
        }
      }
    }
    checkFailures();
    return new Written(sent);
  }

  @Override
  public void abort() {
  }

  @Override
  public void close() {
  }

  /** What a task wrote. */
  record Written(long count) implements WriterCommitMessage {
  }

  /** Where the written columns are (-1: absent), checked once per write. */
  record Columns(int topic, int key, int value, int headers) implements Serializable {
    static Columns of(StructType schema) {
      return new Columns(
          index(schema, "topic", DataTypes.StringType, true),
          index(schema, "key", DataTypes.BinaryType, false),
          index(schema, "value", DataTypes.BinaryType, true),
          index(schema, "headers", DataTypes.createArrayType(MessageRows.HEADER, true), false));
    }

    private static int index(StructType schema, String name, DataType type, boolean required) {
      String[] names = schema.fieldNames();
      for (int i = 0; i < names.length; i++) {
        if (names[i].equalsIgnoreCase(name)) {
          DataType found = schema.fields()[i].dataType();
          if (!sameType(found, type)) {
            throw new IllegalArgumentException(PulsarDataSource.NAME + ": column " + name + " must be "
                + type.simpleString() + ", not " + found.simpleString());
          }
          return i;
        }
      }
      if (required) {
        throw new IllegalArgumentException(PulsarDataSource.NAME + ": the rows to write have no column " + name);
      }
      return -1;
    }

    /** Types equal, ignoring nullability (a headers array may hold nulls or not). */
    private static boolean sameType(DataType found, DataType wanted) {
      if (found instanceof ArrayType array && wanted instanceof ArrayType want) {
        return sameType(array.elementType(), want.elementType());
      }
      if (found instanceof StructType struct && wanted instanceof StructType want) {
        if (struct.fields().length != want.fields().length) {
          return false;
        }
        for (int i = 0; i < struct.fields().length; i++) {
          if (!struct.fields()[i].name().equals(want.fields()[i].name())
              || !sameType(struct.fields()[i].dataType(), want.fields()[i].dataType())) {
            return false;
          }
        }
        return true;
      }
      return found.equals(wanted);
    }
  }
}
