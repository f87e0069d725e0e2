package io.sparkdlq.engine.pulsar;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

/** A read of one topic: as a micro-batch stream, or as a batch of given positions ({@link PulsarBatch}). */
final class PulsarScan implements Scan {
  private final ReadOptions options;

  PulsarScan(ReadOptions options) {
    this.options = options;
  }

  @Override
  public StructType readSchema() {
    return MessageRows.SCHEMA;
  }

  @Override
  public String description() {
    return PulsarDataSource.NAME + "[" + options.topic() + "]";
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    if (options.subscription().isBlank()) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": missing option(s) subscription");
    }
    return new PulsarMicroBatchStream(options);
  }

  @Override
  public Batch toBatch() {
    return new PulsarBatch(options);
  }
}
