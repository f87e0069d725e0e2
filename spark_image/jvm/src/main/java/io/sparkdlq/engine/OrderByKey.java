package io.sparkdlq.engine;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The ordering stage of {@code source.ordering: key}, one instance per Kafka key.
 *
 * <p>State of a key: its head (the source position, partition and offset, of the one message of
 * the key that is in the retry loop), whether the head is blocked (dead-lettered under
 * {@code onDeadLetter: block}), the head's retry records waiting for their due time, and the
 * held records: every later record of the key, sorted by source position.
 *
 * <p>Invariants: a key with held records has a head; a record of a key with a head is never
 * emitted before the head's release, except the head's own due retries and records beyond a
 * bound (emitted with a note, which routing dead-letters as {@code ordering-overflow}). The
 * rows of one batch are taken in this order: controls (release, block), retry records, then
 * parked and source records, so that a retry written by the previous batch holds the source
 * records read with it.
 */
public final class OrderByKey extends StatefulProcessor<byte[], Row, Row> {
  private static final long serialVersionUID = 1L;

  static final int SOURCE = 0;
  static final int PARKED = 1;
  static final int RETRY = 2;
  static final int RELEASE = 3;
  static final int BLOCK = 4;

  private final StructType schema;
  private final long lookaheadMs;
  private final boolean blockOnDeadLetter;
  private final int maxHeldPerKey;
  private final long maxHoldMs;
  private final int kindIndex;
  private final int partitionIndex;
  private final int offsetIndex;
  private final int dueIndex;
  private final int heldAtIndex;
  private final int noteIndex;

  private transient ValueState<Integer> headPartition;
  private transient ValueState<Long> headOffset;
  private transient ValueState<Boolean> blocked;
  private transient ListState<Row> waiting;
  private transient ListState<Row> held;

  public OrderByKey(StructType schema, long lookaheadMs, boolean blockOnDeadLetter, int maxHeldPerKey,
                    long maxHoldMs) {
    this.schema = schema;
    this.lookaheadMs = lookaheadMs;
    this.blockOnDeadLetter = blockOnDeadLetter;
    this.maxHeldPerKey = maxHeldPerKey;
    this.maxHoldMs = maxHoldMs;
    this.kindIndex = schema.fieldIndex("order_kind");
    this.partitionIndex = schema.fieldIndex("order_partition");
    this.offsetIndex = schema.fieldIndex("order_offset");
    this.dueIndex = schema.fieldIndex("due");
    this.heldAtIndex = schema.fieldIndex("held_at");
    this.noteIndex = schema.fieldIndex("order_note");
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    headPartition = getHandle().getValueState("headPartition", Encoders.INT(), TTLConfig.NONE());
    headOffset = getHandle().getValueState("headOffset", Encoders.LONG(), TTLConfig.NONE());
    blocked = getHandle().getValueState("blocked", Encoders.BOOLEAN(), TTLConfig.NONE());
    waiting = getHandle().getListState("waiting", Encoders.row(schema), TTLConfig.NONE());
    held = getHandle().getListState("held", Encoders.row(schema), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(byte[] key, Iterator<Row> rows, TimerValues timerValues) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    List<Row> input = new ArrayList<>();
    while (rows.hasNext()) {
      input.add(rows.next());
    }
    input.sort(Comparator.comparingInt((Row r) -> rank(r.getInt(kindIndex))).thenComparing(this::compare));

    List<Row> out = new ArrayList<>();
    List<Row> pool = new ArrayList<>();
    boolean hasHead = headOffset.exists();
    boolean isBlocked = hasHead && blocked.exists() && blocked.get();
    if (isBlocked && !blockOnDeadLetter) {
      // The policy now says skip: a key blocked under block is released.
      pool.addAll(read(held.get()));
      clearHead();
      hasHead = false;
      isBlocked = false;
    }
    for (Row row : input) {
      int kind = row.getInt(kindIndex);
      if (kind == RELEASE) {
        if (hasHead && !isBlocked && isHead(row)) {
          pool.addAll(read(held.get()));
          clearHead();
          hasHead = false;
        }
      } else if (kind == BLOCK) {
        if (blockOnDeadLetter) {
          setHead(row);
          blocked.update(true);
          hasHead = true;
          isBlocked = true;
        }
      } else if (kind == RETRY) {
        if (!hasHead) {
          setHead(row);
          hasHead = true;
        }
        if (!isBlocked && isHead(row)) {
          long releaseAt = row.getLong(dueIndex) - lookaheadMs;
          if (releaseAt <= now) {
            out.add(row);
          } else {
            waiting.appendValue(row);
            getHandle().registerTimer(releaseAt);
          }
        } else {
          pool.add(row);
        }
      } else {
        pool.add(row);
      }
    }
    if (hasHead) {
      hold(pool, now, out);
    } else {
      pool.sort(this::compare);
      out.addAll(pool);
    }
    return CollectionConverters.asScala(out.iterator());
  }

  /** Adds {@code incoming} to the held records; what exceeds a bound goes to {@code out} with a note. */
  private void hold(List<Row> incoming, long now, List<Row> out) {
    if (incoming.isEmpty()) {
      return;
    }
    List<Row> all = read(held.get());
    // A key already holding records has its timer at its oldest record's expiry; the new ones
    // are younger.
    boolean fresh = all.isEmpty();
    for (Row row : incoming) {
      all.add(row.isNullAt(heldAtIndex) ? with(row, heldAtIndex, now) : row);
    }
    all.sort(this::compare);
    if (all.size() > maxHeldPerKey) {
      for (Row row : all.subList(maxHeldPerKey, all.size())) {
        out.add(with(row, noteIndex, "more than maxHeldPerKey (" + maxHeldPerKey + ") messages held for its key"));
      }
      all = new ArrayList<>(all.subList(0, maxHeldPerKey));
    }
    held.put(all.toArray(new Row[0]));
    if (fresh) {
      getHandle().registerTimer(oldestHeldAt(all) + maxHoldMs);
    }
  }

  @Override
  public Iterator<Row> handleExpiredTimer(byte[] key, TimerValues timerValues,
                                          ExpiredTimerInfo expiredTimerInfo) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    List<Row> out = new ArrayList<>();
    if (waiting.exists()) {
      List<Row> keep = new ArrayList<>();
      for (Row row : read(waiting.get())) {
        if (row.getLong(dueIndex) - lookaheadMs <= now) {
          out.add(row);
        } else {
          keep.add(row);
        }
      }
      if (keep.isEmpty()) {
        waiting.clear();
      } else {
        waiting.put(keep.toArray(new Row[0]));
      }
    }
    if (held.exists()) {
      List<Row> keep = new ArrayList<>();
      for (Row row : read(held.get())) {
        if (row.getLong(heldAtIndex) + maxHoldMs <= now) {
          out.add(with(row, noteIndex, "held longer than maxHoldTime (" + maxHoldMs + " ms) behind its key"));
        } else {
          keep.add(row);
        }
      }
      if (keep.isEmpty()) {
        held.clear();
      } else {
        held.put(keep.toArray(new Row[0]));
        getHandle().registerTimer(oldestHeldAt(keep) + maxHoldMs);
      }
    }
    return CollectionConverters.asScala(out.iterator());
  }

  private static int rank(int kind) {
    if (kind == RELEASE || kind == BLOCK) {
      return 0;
    }
    return kind == RETRY ? 1 : 2;
  }

  private int compare(Row a, Row b) {
    int byPartition = Integer.compare(a.getInt(partitionIndex), b.getInt(partitionIndex));
    return byPartition != 0 ? byPartition : Long.compare(a.getLong(offsetIndex), b.getLong(offsetIndex));
  }

  private boolean isHead(Row row) {
    return headOffset.exists() && headPartition.get() == row.getInt(partitionIndex)
        && headOffset.get() == row.getLong(offsetIndex);
  }

  private void setHead(Row row) {
    headPartition.update(row.getInt(partitionIndex));
    headOffset.update(row.getLong(offsetIndex));
  }

  private void clearHead() {
    headPartition.clear();
    headOffset.clear();
    blocked.clear();
    held.clear();
    waiting.clear();
  }

  private long oldestHeldAt(List<Row> rows) {
    long oldest = Long.MAX_VALUE;
    for (Row row : rows) {
      oldest = Math.min(oldest, row.getLong(heldAtIndex));
    }
    return oldest;
  }

  private static Row with(Row row, int index, Object value) {
    Object[] values = new Object[row.length()];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.get(i);
    }
    values[index] = value;
    return RowFactory.create(values);
  }

  private static List<Row> read(Iterator<Row> stored) {
    List<Row> rows = new ArrayList<>();
    while (stored.hasNext()) {
      rows.add(stored.next());
    }
    return rows;
  }
}
