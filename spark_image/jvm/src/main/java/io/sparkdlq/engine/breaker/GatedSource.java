package io.sparkdlq.engine.breaker;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A streaming source around another one (Spark's {@code kafka}), gated by the breaker.
 *
 * <p>Everything is the inner source's: its offsets (the checkpoint cannot tell the two apart),
 * its partitions and readers, its description in the progress. Only the end offset of the next
 * micro-batch is decided here, from the gate {@code spark-dlq.gate} ({@link BreakerGate}):
 * closed, the inner source's own answer; open, the batch's start (no new record, so nothing
 * is read, and nothing is committed that was not processed); half-open, at most
 * {@code probes} new records. The inner source is still asked while open, so its latest offsets
 * (the lag the engine reports) stay current. The state the batch was planned under is put in
 * the stream thread's local properties for the batch's tasks, and in the source's progress
 * metrics ({@value #METRIC}) for the driver.
 *
 * <p>Options: {@value #INNER} names the inner source (a short name such as {@code kafka}, or a
 * class), {@value #GATE} the gate; both are removed before the inner source sees the options.
 */
public final class GatedSource implements TableProvider {
  public static final String INNER = "spark-dlq.inner";
  public static final String GATE = "spark-dlq.gate";
  /** The progress metric with the state the last planned micro-batch ran under. */
  public static final String METRIC = "sparkDlqBreaker";
  private static final String OWN_PREFIX = "spark-dlq.";

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return inner(options).inferSchema(innerOptions(options));
  }

  @Override
  public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
    return inner(options).inferPartitioning(innerOptions(options));
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(properties);
    Table table = inner(options).getTable(schema, partitioning, innerOptions(options).asCaseSensitiveMap());
    if (!(table instanceof SupportsRead readable)) {
      throw new IllegalArgumentException(options.get(INNER) + " cannot be read");
    }
    String gate = options.get(GATE);
    if (gate == null || gate.isEmpty()) {
      throw new IllegalArgumentException("the option " + GATE + " names no gate");
    }
    return new GatedTable(readable, gate);
  }

  private static TableProvider inner(CaseInsensitiveStringMap options) {
    String name = options.get(INNER);
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("the option " + INNER + " names no source");
    }
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    if (loader == null) {
      loader = GatedSource.class.getClassLoader();
    }
    for (DataSourceRegister registered : ServiceLoader.load(DataSourceRegister.class, loader)) {
      if (registered.shortName().equalsIgnoreCase(name) && registered instanceof TableProvider provider) {
        return provider;
      }
    }
    try {
      Object found = Class.forName(name, true, loader).getDeclaredConstructor().newInstance();
      if (found instanceof TableProvider provider) {
        return provider;
      }
    } catch (ReflectiveOperationException error) {
      throw new IllegalArgumentException("no streaming source " + name + " on the class path", error);
    }
    throw new IllegalArgumentException(name + " is not a DataSource V2 source");
  }

  /** The options without the gate's own. */
  static CaseInsensitiveStringMap innerOptions(CaseInsensitiveStringMap options) {
    Map<String, String> kept = new HashMap<>();
    for (Map.Entry<String, String> entry : options.asCaseSensitiveMap().entrySet()) {
      if (!entry.getKey().toLowerCase(java.util.Locale.ROOT).startsWith(OWN_PREFIX)) {
        kept.put(entry.getKey(), entry.getValue());
      }
    }
    return new CaseInsensitiveStringMap(kept);
  }

  /** The inner table, read only as a micro-batch stream. */
  static final class GatedTable implements SupportsRead {
    private final SupportsRead inner;
    private final String gate;

    GatedTable(SupportsRead inner, String gate) {
      this.inner = inner;
      this.gate = gate;
    }

    @Override
    public String name() {
      return inner.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return inner.schema();
    }

    @Override
    public Column[] columns() {
      return inner.columns();
    }

    @Override
    public Transform[] partitioning() {
      return inner.partitioning();
    }

    @Override
    public Map<String, String> properties() {
      return inner.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
      Set<TableCapability> capabilities = EnumSet.noneOf(TableCapability.class);
      if (inner.capabilities().contains(TableCapability.MICRO_BATCH_READ)) {
        capabilities.add(TableCapability.MICRO_BATCH_READ);
      }
      return capabilities;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder builder = inner.newScanBuilder(innerOptions(options));
      return () -> new GatedScan(builder.build(), gate);
    }
  }

  /** The inner scan, streamed through a {@link GatedStream}. */
  static final class GatedScan implements Scan {
    private final Scan inner;
    private final String gate;

    GatedScan(Scan inner, String gate) {
      this.inner = inner;
      this.gate = gate;
    }

    @Override
    public StructType readSchema() {
      return inner.readSchema();
    }

    @Override
    public String description() {
      return inner.description();
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new GatedStream(inner.toMicroBatchStream(checkpointLocation), gate);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return inner.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
      return inner.reportDriverMetrics();
    }
  }

  /** The inner stream with the next batch's end decided by the gate. */
  static final class GatedStream implements MicroBatchStream, SupportsAdmissionControl, ReportsSourceMetrics {
    private final MicroBatchStream inner;
    private final String gate;
    /** The state the last planned micro-batch ran under (closed before the first). */
    private volatile String applied = BreakerGate.CLOSED;

    GatedStream(MicroBatchStream inner, String gate) {
      this.inner = inner;
      this.gate = gate;
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      BreakerGate.Setting setting = BreakerGate.get(gate);
      applied = setting.state();
      SparkContext context = SparkContext.getOrCreate();
      context.setLocalProperty(BreakerGate.STATE_PROPERTY, setting.state());
      context.setLocalProperty(BreakerGate.PROBES_PROPERTY, Integer.toString(setting.probes()));
      ReadLimit asked = BreakerGate.HALF_OPEN.equals(setting.state()) ? ReadLimit.maxRows(setting.probes()) : limit;
      Offset latest = inner instanceof SupportsAdmissionControl admitted
          ? admitted.latestOffset(start, asked)
          : inner.latestOffset();
      return BreakerGate.OPEN.equals(setting.state()) ? start : latest;
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return inner instanceof SupportsAdmissionControl admitted ? admitted.getDefaultReadLimit() : ReadLimit.allAvailable();
    }

    @Override
    public Offset reportLatestOffset() {
      return inner instanceof SupportsAdmissionControl admitted ? admitted.reportLatestOffset() : null;
    }

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
      Map<String, String> metrics = new HashMap<>();
      if (inner instanceof ReportsSourceMetrics reporting) {
        metrics.putAll(reporting.metrics(latestConsumedOffset));
      }
      metrics.put(METRIC, applied);
      return metrics;
    }

    @Override
    public Offset latestOffset() {
      return inner.latestOffset();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      return inner.planInputPartitions(start, end);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return inner.createReaderFactory();
    }

    @Override
    public Offset initialOffset() {
      return inner.initialOffset();
    }

    @Override
    public Offset deserializeOffset(String json) {
      return inner.deserializeOffset(json);
    }

    @Override
    public void commit(Offset end) {
      inner.commit(end);
    }

    @Override
    public void stop() {
      inner.stop();
    }

    @Override
    public String toString() {
      return inner.toString();
    }
  }
}
