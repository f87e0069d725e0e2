package io.sparkdlq.engine;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;

/**
 * The delay stage's released records of one task, those not yet due in due order.
 *
 * <p>{@code transformWithState} emits the groups that pass straight on (in bucket order), then
 * the groups its timers release (in timer order): each run is in due order, the two together
 * are not. The routing task waits for each record in turn ({@code release_when_due}), so a
 * record due later ahead of one due sooner made the sooner one late by the difference. Records
 * already due when the task starts pass on at once, in the order they come; the others (at most
 * what the lookahead releases ahead of time) are kept and handed on sorted by their exact due
 * time once the input is read.
 */
final class InDueOrder implements MapPartitionsFunction<Row, Row> {
  private static final long serialVersionUID = 1L;
  private final int index;

  InDueOrder(int index) {
    this.index = index;
  }

  @Override
  public Iterator<Row> call(Iterator<Row> rows) {
    long now = System.currentTimeMillis();
    List<Row> later = new ArrayList<>();
    return new Iterator<Row>() {
      private Row next;
      private Iterator<Row> sorted;

      @Override
      public boolean hasNext() {
        if (next != null) {
          return true;
        }
        while (sorted == null && rows.hasNext()) {
          Row row = rows.next();
          if (row.isNullAt(index) || row.getLong(index) <= now) {
            next = row;
            return true;
          }
          later.add(row);
        }
        if (sorted == null) {
          later.sort(Comparator.comparingLong(row -> row.getLong(index)));
          sorted = later.iterator();
        }
        if (sorted.hasNext()) {
          next = sorted.next();
          return true;
        }
        return false;
      }

      @Override
      public Row next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        Row row = next;
        next = null;
        return row;
      }
    };
  }
}
