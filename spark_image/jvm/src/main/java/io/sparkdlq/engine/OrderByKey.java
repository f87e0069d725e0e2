package io.sparkdlq.engine;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The ordering stage of {@code source.ordering: key}, one instance per group of Kafka keys
 * ({@link #group}: the keys hashed into {@link #GROUPS} groups).
 *
 * <p>State of a key: its head (the source position, partition and offset, of the one message of
 * the key that is in the retry loop), whether the head is blocked (dead-lettered under
 * {@code onDeadLetter: block}), the head's retry records waiting for their due time, and the
 * held records: every later record of the key, sorted by source position. State of a group: how
 * many records its keys hold and how many of its keys are blocked, which keys are blocked, and
 * when its next timer fires. A group exists so that these counts can be kept at all: Spark's
 * state is per grouping key, so a bound on the held records of all keys is a bound per group,
 * {@code maxHeldTotal} shared evenly by the groups.
 *
 * <p>Invariants: a key with held records has a head; a record of a key with a head is never
 * emitted before the head's release, except the head's own due retries and records beyond a
 * bound (emitted with a note, which routing dead-letters as {@code ordering-overflow}). The
 * rows of one key in a batch are taken in this order: controls (release, block), retry records,
 * then parked and source records, so that a retry written by the previous batch holds the
 * source records read with it. A group with a head has a timer pending no later than any of
 * its keys' deadlines (a waiting retry's release, a held record's expiry) and no later than
 * {@link #REPORT_EVERY_MS} ahead; each call ends with a report row (kind {@link #REPORT}: the
 * group's counts and a sample of its blocked keys) that the driver reads from the batch's
 * observed metrics and never routes.
 */
public final class OrderByKey extends StatefulProcessor<Integer, Row, Row> {
  private static final long serialVersionUID = 1L;

  /** How many groups the keys are hashed into (the stage's grouping keys). */
  public static final int GROUPS = 16;
  /** The longest a group with held or blocked keys goes without a report. */
  static final long REPORT_EVERY_MS = 10_000L;
  /** The most blocked keys one report names. */
  static final int SAMPLE = 10;

  static final int SOURCE = 0;
  static final int PARKED = 1;
  static final int RETRY = 2;
  static final int RELEASE = 3;
  static final int BLOCK = 4;
  static final int REPORT = 5;

  private static final StructType HEAD = new StructType()
      .add("partition", DataTypes.IntegerType, false)
      .add("offset", DataTypes.LongType, false)
      .add("blocked", DataTypes.BooleanType, false)
      .add("deadline", DataTypes.LongType, false);

  private final StructType schema;
  private final StructType records;
  private final long lookaheadMs;
  private final boolean blockOnDeadLetter;
  private final int maxHeldPerKey;
  private final long maxHeldTotal;
  private final long maxHoldMs;
  private final int keyIndex;
  private final int kindIndex;
  private final int partitionIndex;
  private final int offsetIndex;
  private final int dueIndex;
  private final int heldAtIndex;
  private final int noteIndex;
  private final int reportIndex;

  private transient MapState<byte[], Row> heads;
  private transient MapState<byte[], Row> waiting;
  private transient MapState<byte[], Row> held;
  private transient MapState<byte[], Boolean> blockedKeys;
  private transient ValueState<Long> heldCount;
  private transient ValueState<Long> blockedCount;
  private transient ValueState<Long> wakeAt;
  private transient ValueState<Long> scannedAt;
  private transient ValueState<Long> reports;

  public OrderByKey(StructType schema, long lookaheadMs, boolean blockOnDeadLetter, int maxHeldPerKey,
                    long maxHeldTotal, long maxHoldMs) {
    this.schema = schema;
    this.records = new StructType().add("records", DataTypes.createArrayType(schema, false), false);
    this.lookaheadMs = lookaheadMs;
    this.blockOnDeadLetter = blockOnDeadLetter;
    this.maxHeldPerKey = maxHeldPerKey;
    this.maxHeldTotal = maxHeldTotal;
    this.maxHoldMs = maxHoldMs;
    this.keyIndex = schema.fieldIndex("key");
    this.kindIndex = schema.fieldIndex("order_kind");
    this.partitionIndex = schema.fieldIndex("order_partition");
    this.offsetIndex = schema.fieldIndex("order_offset");
    this.dueIndex = schema.fieldIndex("due");
    this.heldAtIndex = schema.fieldIndex("held_at");
    this.noteIndex = schema.fieldIndex("order_note");
    this.reportIndex = schema.fieldIndex("order_report");
  }

  /** The group of a Kafka key (the tests pick keys of one group with it). */
  public static int group(byte[] key) {
    return Math.floorMod(Arrays.hashCode(key), GROUPS);
  }

  /** The share of {@code total} held records that group {@code group} may hold. */
  static long share(long total, int group) {
    return total / GROUPS + (group < total % GROUPS ? 1 : 0);
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    heads = getHandle().getMapState("orderHeads", Encoders.BINARY(), Encoders.row(HEAD), TTLConfig.NONE());
    waiting = getHandle().getMapState("orderWaiting", Encoders.BINARY(), Encoders.row(records), TTLConfig.NONE());
    held = getHandle().getMapState("orderHeld", Encoders.BINARY(), Encoders.row(records), TTLConfig.NONE());
    blockedKeys = getHandle().getMapState("orderBlocked", Encoders.BINARY(), Encoders.BOOLEAN(), TTLConfig.NONE());
    heldCount = getHandle().getValueState("orderHeldCount", Encoders.LONG(), TTLConfig.NONE());
    blockedCount = getHandle().getValueState("orderBlockedCount", Encoders.LONG(), TTLConfig.NONE());
    wakeAt = getHandle().getValueState("orderWakeAt", Encoders.LONG(), TTLConfig.NONE());
    scannedAt = getHandle().getValueState("orderScannedAt", Encoders.LONG(), TTLConfig.NONE());
    reports = getHandle().getValueState("orderReports", Encoders.LONG(), TTLConfig.NONE());
  }

  /** One key's state while a call works on it. */
  private static final class Key {
    final byte[] key;
    boolean hasHead;
    int headPartition;
    long headOffset;
    boolean blocked;
    List<Row> waiting = new ArrayList<>();
    List<Row> held = new ArrayList<>();
    final boolean hadHead;
    final int heldBefore;
    final boolean blockedBefore;

    Key(byte[] key, Row head, List<Row> waiting, List<Row> held) {
      this.key = key;
      if (head != null) {
        hasHead = true;
        headPartition = head.getInt(0);
        headOffset = head.getLong(1);
        blocked = head.getBoolean(2);
        this.waiting = waiting;
        this.held = held;
      }
      hadHead = hasHead;
      heldBefore = this.held.size();
      blockedBefore = blocked;
    }

    void clear() {
      hasHead = false;
      blocked = false;
      waiting = new ArrayList<>();
      held = new ArrayList<>();
    }
  }

  /** The counts of the group during a call. */
  private final class Counts {
    long held = heldCount.exists() ? heldCount.get() : 0L;
    long blocked = blockedCount.exists() ? blockedCount.get() : 0L;
    final long cap;

    Counts(int group) {
      cap = share(maxHeldTotal, group);
    }
  }

  @Override
  public Iterator<Row> handleInputRows(Integer group, Iterator<Row> rows, TimerValues timerValues) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    Map<ByteBuffer, List<Row>> byKey = new LinkedHashMap<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      byKey.computeIfAbsent(ByteBuffer.wrap((byte[]) row.get(keyIndex)), k -> new ArrayList<>()).add(row);
    }
    List<Row> out = new ArrayList<>();
    Counts counts = new Counts(group);
    long earliest = Long.MAX_VALUE;
    for (Map.Entry<ByteBuffer, List<Row>> entry : byKey.entrySet()) {
      Key key = load(entry.getKey().array());
      handleKey(key, entry.getValue(), now, counts, out);
      earliest = Math.min(earliest, save(key, counts));
    }
    finish(group, now, earliest, counts, out);
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(Integer group, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    List<Row> out = new ArrayList<>();
    if (scannedAt.exists() && scannedAt.get() == now) {
      return CollectionConverters.asScala(out.iterator()); // this batch's first timer scanned the group
    }
    scannedAt.update(now);
    Counts counts = new Counts(group);
    long earliest = Long.MAX_VALUE;
    List<byte[]> due = new ArrayList<>();
    Iterator<Tuple2<byte[], Row>> all = heads.iterator();
    while (all.hasNext()) {
      Tuple2<byte[], Row> head = all.next();
      long deadline = head._2().getLong(3);
      boolean released = head._2().getBoolean(2) && !blockOnDeadLetter;
      if (deadline <= now || released) {
        due.add(head._1());
      } else {
        earliest = Math.min(earliest, deadline);
      }
    }
    for (byte[] bytes : due) {
      Key key = load(bytes);
      expire(key, now, counts, out);
      earliest = Math.min(earliest, save(key, counts));
    }
    if (wakeAt.exists() && wakeAt.get() <= now) {
      wakeAt.clear();
    }
    finish(group, now, earliest, counts, out);
    return CollectionConverters.asScala(out.iterator());
  }

  /** The records of one key in one batch (see the class's text). */
  private void handleKey(Key key, List<Row> input, long now, Counts counts, List<Row> out) {
    input.sort(Comparator.comparingInt((Row r) -> rank(r.getInt(kindIndex))).thenComparing(this::compare));
    List<Row> pool = new ArrayList<>();
    if (key.blocked && !blockOnDeadLetter) {
      // The policy now says skip: a key blocked under block is released.
      pool.addAll(key.held);
      key.clear();
    }
    for (Row row : input) {
      int kind = row.getInt(kindIndex);
      if (kind == RELEASE) {
        if (key.hasHead && !key.blocked && isHead(key, row)) {
          pool.addAll(key.held);
          key.clear();
        }
      } else if (kind == BLOCK) {
        if (blockOnDeadLetter) {
          setHead(key, row);
          key.blocked = true;
        }
      } else if (kind == RETRY) {
        if (!key.hasHead) {
          setHead(key, row);
        }
        if (!key.blocked && isHead(key, row)) {
          if (releaseAt(row) <= now) {
            out.add(row);
          } else {
            key.waiting.add(row);
          }
        } else {
          pool.add(row);
        }
      } else {
        pool.add(row);
      }
    }
    if (key.hasHead) {
      hold(key, pool, now, counts, out);
    } else {
      pool.sort(this::compare);
      out.addAll(pool);
    }
  }

  /** Adds {@code incoming} to the key's held records; what exceeds a bound goes to {@code out} with a note. */
  private void hold(Key key, List<Row> incoming, long now, Counts counts, List<Row> out) {
    if (incoming.isEmpty()) {
      return;
    }
    List<Row> all = new ArrayList<>(key.held);
    for (Row row : incoming) {
      all.add(row.isNullAt(heldAtIndex) ? with(row, heldAtIndex, now) : row);
    }
    all.sort(this::compare);
    // What the group may hold beyond its other keys' records, this key's included.
    long room = Math.max(0L, counts.cap - (counts.held - key.heldBefore));
    if (all.size() > Math.min(maxHeldPerKey, room)) {
      String note = maxHeldPerKey <= room
          ? "more than maxHeldPerKey (" + maxHeldPerKey + ") messages held for its key"
          : "more than maxHeldTotal (" + maxHeldTotal + ") messages held in all (" + counts.cap
              + " for its group of keys, " + (counts.held - key.heldBefore) + " held by others)";
      int keep = (int) Math.min(maxHeldPerKey, room);
      for (Row row : all.subList(keep, all.size())) {
        out.add(with(row, noteIndex, note));
      }
      all = new ArrayList<>(all.subList(0, keep));
    }
    key.held = all;
  }

  /** A timer's work on one key: due retries go on, records held too long leave with a note. */
  private void expire(Key key, long now, Counts counts, List<Row> out) {
    if (key.blocked && !blockOnDeadLetter) {
      List<Row> released = new ArrayList<>(key.held);
      key.clear();
      released.sort(this::compare);
      out.addAll(released);
      return;
    }
    List<Row> keepWaiting = new ArrayList<>();
    for (Row row : key.waiting) {
      if (releaseAt(row) <= now) {
        out.add(row);
      } else {
        keepWaiting.add(row);
      }
    }
    key.waiting = keepWaiting;
    List<Row> keepHeld = new ArrayList<>();
    for (Row row : key.held) {
      if (row.getLong(heldAtIndex) + maxHoldMs <= now) {
        out.add(with(row, noteIndex, "held longer than maxHoldTime (" + maxHoldMs + " ms) behind its key"));
      } else {
        keepHeld.add(row);
      }
    }
    key.held = keepHeld;
  }

  /** Writes a key's state back and adjusts the group's counts; the key's next deadline. */
  private long save(Key key, Counts counts) {
    counts.held += key.held.size() - key.heldBefore;
    if (key.blocked != key.blockedBefore) {
      counts.blocked += key.blocked ? 1 : -1;
      if (key.blocked) {
        blockedKeys.updateValue(key.key, true);
      } else {
        blockedKeys.removeKey(key.key);
      }
    }
    if (!key.hasHead) {
      if (key.hadHead) { // a key that never had one has nothing stored: no writes for it
        heads.removeKey(key.key);
        waiting.removeKey(key.key);
        held.removeKey(key.key);
      }
      return Long.MAX_VALUE;
    }
    long deadline = Long.MAX_VALUE;
    for (Row row : key.waiting) {
      deadline = Math.min(deadline, releaseAt(row));
    }
    for (Row row : key.held) {
      deadline = Math.min(deadline, row.getLong(heldAtIndex) + maxHoldMs);
    }
    heads.updateValue(key.key, RowFactory.create(key.headPartition, key.headOffset, key.blocked, deadline));
    put(waiting, key.key, key.waiting);
    put(held, key.key, key.held);
    return deadline;
  }

  /** The end of a call: the counts, the next timer, the report. */
  private void finish(int group, long now, long earliest, Counts counts, List<Row> out) {
    heldCount.update(counts.held);
    blockedCount.update(counts.blocked);
    if (heads.exists()) {
      long target = Math.min(earliest, now + REPORT_EVERY_MS);
      if (!wakeAt.exists() || wakeAt.get() <= now || wakeAt.get() > target) {
        if (!pending(target)) {
          getHandle().registerTimer(target);
        }
        wakeAt.update(target);
      }
    }
    long seq = (reports.exists() ? reports.get() : 0L) + 1;
    reports.update(seq);
    List<byte[]> sample = new ArrayList<>();
    Iterator<byte[]> blocked = blockedKeys.keys();
    while (blocked.hasNext() && sample.size() < SAMPLE) {
      sample.add(blocked.next());
    }
    Object[] values = new Object[schema.length()];
    values[kindIndex] = REPORT;
    values[dueIndex] = 0L;
    values[reportIndex] = RowFactory.create(group, seq, counts.held, counts.blocked,
        CollectionConverters.asScala(sample).toSeq());
    out.add(RowFactory.create(values));
  }

  private boolean pending(long at) {
    Iterator<Object> timers = getHandle().listTimers();
    while (timers.hasNext()) {
      if ((Long) timers.next() == at) {
        return true;
      }
    }
    return false;
  }

  private Key load(byte[] bytes) {
    Row head = heads.getValue(bytes);
    if (head == null) {
      return new Key(bytes, null, null, null);
    }
    return new Key(bytes, head, get(waiting, bytes), get(held, bytes));
  }

  private static List<Row> get(MapState<byte[], Row> state, byte[] key) {
    Row value = state.getValue(key);
    return value == null ? new ArrayList<>() : new ArrayList<>(value.<Row>getList(0));
  }

  private static void put(MapState<byte[], Row> state, byte[] key, List<Row> rows) {
    if (rows.isEmpty()) {
      state.removeKey(key);
    } else {
      state.updateValue(key, RowFactory.create(CollectionConverters.asScala(rows).toSeq()));
    }
  }

  private long releaseAt(Row row) {
    return row.getLong(dueIndex) - lookaheadMs;
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

  private boolean isHead(Key key, Row row) {
    return key.hasHead && key.headPartition == row.getInt(partitionIndex) && key.headOffset == row.getLong(offsetIndex);
  }

  private void setHead(Key key, Row row) {
    key.hasHead = true;
    key.headPartition = row.getInt(partitionIndex);
    key.headOffset = row.getLong(offsetIndex);
  }

  private static Row with(Row row, int index, Object value) {
    Object[] values = new Object[row.length()];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.get(i);
    }
    values[index] = value;
    return RowFactory.create(values);
  }
}
