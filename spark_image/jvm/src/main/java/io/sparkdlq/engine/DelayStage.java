package io.sparkdlq.engine;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;

/** Entry points called from the Python engine (py4j): the delay and ordering stages on the JVM. */
public final class DelayStage {
  private DelayStage() {
  }

  /**
   * The retry records of {@code withDue}, each released no earlier than {@code lookaheadMs}
   * before the bucket named by its long column {@code dueColumn}, those not yet due in the
   * order of their long column {@code deliverAtColumn} ({@link InDueOrder}); same schema as
   * the input.
   */
  public static Dataset<Row> holdUntilDue(Dataset<Row> withDue, String dueColumn, String deliverAtColumn,
                                          long lookaheadMs) {
    int index = withDue.schema().fieldIndex(dueColumn);
    Dataset<Row> released = withDue
        .groupByKey(new DueBucket(index), Encoders.LONG())
        .transformWithState(new HoldUntilDue(withDue.schema(), lookaheadMs),
            TimeMode.ProcessingTime(), OutputMode.Append(), Encoders.row(withDue.schema()));
    return inDueOrder(released, deliverAtColumn);
  }

  /**
   * The records of {@code released}, in each partition those due (by their long column
   * {@code deliverAtColumn}, epoch ms) as they come, then the others in due order
   * ({@link InDueOrder}); same schema as the input.
   */
  public static Dataset<Row> inDueOrder(Dataset<Row> released, String deliverAtColumn) {
    return released.mapPartitions(new InDueOrder(released.schema().fieldIndex(deliverAtColumn)),
        Encoders.row(released.schema()));
  }

  /**
   * The records of {@code input} (source, retry and control records of non-null keys, with the
   * columns {@link OrderByKey} names) in per-key order: a key's records wait behind its message
   * in the retry loop ({@code source.ordering: key}); same schema as the input, plus one report
   * row per group of keys and call (kind {@link OrderByKey#REPORT}).
   */
  public static Dataset<Row> orderByKey(Dataset<Row> input, long lookaheadMs, boolean blockOnDeadLetter,
                                        int maxHeldPerKey, long maxHeldTotal, long maxHoldMs) {
    int index = input.schema().fieldIndex("key");
    OrderByKey stage = new OrderByKey(input.schema(), lookaheadMs, blockOnDeadLetter, maxHeldPerKey, maxHeldTotal,
        maxHoldMs);
    return input
        .groupByKey(new KeyGroup(index), Encoders.INT())
        .transformWithState(stage, TimeMode.ProcessingTime(), OutputMode.Append(), Encoders.row(input.schema()));
  }

  /** The grouping key of the ordering stage: the group of a record's Kafka key (never null there). */
  static final class KeyGroup implements MapFunction<Row, Integer> {
    private static final long serialVersionUID = 1L;
    private final int index;

    KeyGroup(int index) {
      this.index = index;
    }

    @Override
    public Integer call(Row row) {
      return OrderByKey.group((byte[]) row.get(index));
    }
  }

  /** The grouping key: the due bucket of a record. */
  static final class DueBucket implements MapFunction<Row, Long> {
    private static final long serialVersionUID = 1L;
    private final int index;

    DueBucket(int index) {
      this.index = index;
    }

    @Override
    public Long call(Row row) {
      return row.getLong(index);
    }
  }
}
