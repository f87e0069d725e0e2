package io.sparkdlq.engine.pulsar;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Pulsar topics as a table: read as a micro-batch stream or a batch of given positions, written
 * by a streaming query or a batch append. The written columns differ from the read ones ({@code topic, key, value, headers}), so the
 * table accepts any schema and the writer checks it, as Spark's Kafka table does.
 */
final class PulsarTable implements SupportsRead, SupportsWrite {
  @Override
  public String name() {
    return PulsarDataSource.NAME;
  }

  /** Deprecated in Spark 4.0 for {@code columns()}, which reads it, and still abstract. */
  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return MessageRows.SCHEMA;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_READ,
        TableCapability.STREAMING_WRITE, TableCapability.BATCH_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    ReadOptions read = ReadOptions.of(options);
    return () -> new PulsarScan(read);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    PulsarWrite write = new PulsarWrite(WriteOptions.of(info.options()), info.schema());
    return new WriteBuilder() {
      @Override
      public Write build() {
        return write;
      }
    };
  }
}
