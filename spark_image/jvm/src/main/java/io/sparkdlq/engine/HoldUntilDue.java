package io.sparkdlq.engine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The delay stage's state machine, one instance per group of retry records that fall due in
 * the same bucket (the key: the bucket's end, epoch ms).
 *
 * <p>A group whose release time (due minus the lookahead) has come passes straight on; any
 * other group is appended to the group's list state with a processing-time timer at its
 * release time, and the timer hands the held records on and clears the state. The records
 * are passed on unchanged (the rows keep the input schema); the routing task holds each one
 * back until its exact due time, so nothing is processed early.
 */
public final class HoldUntilDue extends StatefulProcessor<Long, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final StructType schema;
  private final long lookaheadMs;
  private transient ListState<Row> held;

  public HoldUntilDue(StructType schema, long lookaheadMs) {
    this.schema = schema;
    this.lookaheadMs = lookaheadMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getListState("held", Encoders.row(schema), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Long due, Iterator<Row> rows, TimerValues timerValues) {
    long releaseAt = due - lookaheadMs;
    if (releaseAt <= timerValues.getCurrentProcessingTimeInMs()) {
      return rows;
    }
    List<Row> waiting = new ArrayList<>();
    while (rows.hasNext()) {
      waiting.add(rows.next());
    }
    if (!waiting.isEmpty()) {
      held.appendList(waiting.toArray(new Row[0]));
      getHandle().registerTimer(releaseAt);
    }
    return empty();
  }

  @Override
  public Iterator<Row> handleExpiredTimer(Long due, TimerValues timerValues,
                                          ExpiredTimerInfo expiredTimerInfo) {
    List<Row> released = new ArrayList<>();
    Iterator<Row> stored = held.get();
    while (stored.hasNext()) {
      released.add(stored.next());
    }
    held.clear();
    return CollectionConverters.asScala(released.iterator());
  }

  private static Iterator<Row> empty() {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }
}
