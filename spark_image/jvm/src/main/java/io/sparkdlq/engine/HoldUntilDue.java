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
import io.sparkdlq.engine.breaker.BreakerGate;
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
 *
 * <p>With a breaker ({@code retry.breaker}) a task hands on no record while its micro-batch was
 * planned with the breaker open, and at most the probes while half-open
 * ({@link BreakerGate#releaseBudget}): the rest stay in the group's state, with a timer one
 * lookahead later, until a batch planned while closed (or the next half-open one) takes them.
 */
public final class HoldUntilDue extends StatefulProcessor<Long, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final StructType schema;
  private final long lookaheadMs;
  private transient ListState<Row> held;
  /** Records this task may still hand on; -1: no limit (no breaker, or closed). */
  private transient long budget;

  public HoldUntilDue(StructType schema, long lookaheadMs) {
    this.schema = schema;
    this.lookaheadMs = lookaheadMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getListState("held", Encoders.row(schema), TTLConfig.NONE());
    budget = BreakerGate.releaseBudget();
  }

  @Override
  public Iterator<Row> handleInputRows(Long due, Iterator<Row> rows, TimerValues timerValues) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    long releaseAt = due - lookaheadMs;
    if (releaseAt <= now && budget < 0) {
      return rows;
    }
    List<Row> waiting = new ArrayList<>();
    while (rows.hasNext()) {
      waiting.add(rows.next());
    }
    if (releaseAt > now) {
      hold(waiting, releaseAt);
      return empty();
    }
    return pass(waiting, now);
  }

  @Override
  public Iterator<Row> handleExpiredTimer(Long due, TimerValues timerValues,
                                          ExpiredTimerInfo expiredTimerInfo) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    if (budget == 0) {
      // Open: the list is not even read; the group is looked at again one lookahead later.
      getHandle().registerTimer(now + lookaheadMs);
      return empty();
    }
    List<Row> released = new ArrayList<>();
    Iterator<Row> stored = held.get();
    while (stored.hasNext()) {
      released.add(stored.next());
    }
    held.clear();
    return pass(released, now);
  }

  /** The records this task may still hand on; the others held one lookahead longer. */
  private Iterator<Row> pass(List<Row> records, long now) {
    if (budget < 0 || records.size() <= budget) {
      budget = budget < 0 ? budget : budget - records.size();
      return CollectionConverters.asScala(records.iterator());
    }
    int passing = (int) budget;
    budget = 0;
    hold(records.subList(passing, records.size()), now + lookaheadMs);
    return CollectionConverters.asScala(new ArrayList<>(records.subList(0, passing)).iterator());
  }

  private void hold(List<Row> records, long releaseAt) {
    if (!records.isEmpty()) {
      held.appendList(records.toArray(new Row[0]));
      getHandle().registerTimer(releaseAt);
    }
  }

  private static Iterator<Row> empty() {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }
}
