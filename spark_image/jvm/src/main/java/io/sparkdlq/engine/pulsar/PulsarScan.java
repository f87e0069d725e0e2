package io.sparkdlq.engine.pulsar;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

/** A read of one topic: only as a micro-batch stream. */
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
    return new PulsarMicroBatchStream(options);
  }
}
