package io.sparkdlq.engine;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;

/** Entry point called from the Python engine (py4j): the delay stage on the JVM. */
public final class DelayStage {
  private DelayStage() {
  }

  /**
   * The retry records of {@code withDue}, each released no earlier than {@code lookaheadMs}
   * before the bucket named by its long column {@code dueColumn}; same schema as the input.
   */
  public static Dataset<Row> holdUntilDue(Dataset<Row> withDue, String dueColumn, long lookaheadMs) {
    int index = withDue.schema().fieldIndex(dueColumn);
    return withDue
        .groupByKey(new DueBucket(index), Encoders.LONG())
        .transformWithState(new HoldUntilDue(withDue.schema(), lookaheadMs),
            TimeMode.ProcessingTime(), OutputMode.Append(), Encoders.row(withDue.schema()));
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
