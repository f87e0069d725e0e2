package io.sparkdlq.engine.pulsar;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The format the engine reads and writes Pulsar topics with ({@code format(<this class's name>)}):
 * one table whose rows have the Kafka source's columns ({@link MessageRows#SCHEMA}).
 */
public final class PulsarDataSource implements TableProvider {
  /** The connector's name in errors and descriptions. */
  static final String NAME = "spark-dlq-pulsar";

  public PulsarDataSource() {
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return MessageRows.SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new PulsarTable();
  }
}
