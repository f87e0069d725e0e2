package io.sparkdlq.engine.breaker;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.TaskContext;

/**
 * The breaker's gates, one per running engine, set by the driver's Python runner (py4j) and
 * read where a micro-batch is planned.
 *
 * <p>The runner decides the breaker's state ({@code dlq_engine.routing.breaker}) and sets it
 * here. The {@link GatedSource} around the source topic reads it once per trigger, on the
 * stream's own thread, when Spark asks for the next batch's end offsets: it lets no new source
 * record in while open and at most {@code probes} while half-open, and it puts the state in two
 * local properties of that thread. Spark hands a thread's local properties to every task of the
 * jobs it then submits, so each task of that micro-batch, on any executor, sees the state the
 * batch was planned under: the delay stage releases no retry while open and at most
 * {@code probes} per task while half-open ({@link #releaseBudget}), and routing lifts the
 * redelivery limits of a half-open batch ({@code dlq_engine.job.breaker}).
 */
public final class BreakerGate {
  /** The local property with the state a micro-batch was planned under. */
  public static final String STATE_PROPERTY = "spark-dlq.breaker";
  /** The local property with the probes a half-open micro-batch lets through. */
  public static final String PROBES_PROPERTY = "spark-dlq.breaker.probes";
  public static final String CLOSED = "closed";
  public static final String OPEN = "open";
  public static final String HALF_OPEN = "half-open";
  private static final Set<String> STATES = Set.of(CLOSED, OPEN, HALF_OPEN);

  /** A gate's state and probes. */
  record Setting(String state, int probes) {
  }

  private static final Setting CLOSED_SETTING = new Setting(CLOSED, 0);
  private static final Map<String, Setting> GATES = new ConcurrentHashMap<>();

  private BreakerGate() {
  }

  /** Sets gate {@code gate} to {@code state} (closed, open or half-open) with {@code probes}. */
  public static void set(String gate, String state, int probes) {
    if (!STATES.contains(state)) {
      throw new IllegalArgumentException("unknown breaker state " + state + ", not one of " + STATES);
    }
    if (probes < 1) {
      throw new IllegalArgumentException("probes must be at least 1, got " + probes);
    }
    GATES.put(gate, new Setting(state, probes));
  }

  /** Forgets gate {@code gate} (its engine stopped). */
  public static void remove(String gate) {
    GATES.remove(gate);
  }

  /** The setting of {@code gate}: closed when it was never set. */
  static Setting get(String gate) {
    return GATES.getOrDefault(gate, CLOSED_SETTING);
  }

  /**
   * How many records the delay stage may hand on in the current task: -1 (no limit) unless its
   * micro-batch was planned while the breaker was open (0) or half-open (the probes).
   */
  public static long releaseBudget() {
    TaskContext task = TaskContext.get();
    if (task == null) {
      return -1;
    }
    String state = task.getLocalProperty(STATE_PROPERTY);
    if (OPEN.equals(state)) {
      return 0;
    }
    if (HALF_OPEN.equals(state)) {
      try {
        return Math.max(1, Long.parseLong(task.getLocalProperty(PROBES_PROPERTY)));
      } catch (NumberFormatException error) {
        return 1;
      }
    }
    return -1;
  }
}
