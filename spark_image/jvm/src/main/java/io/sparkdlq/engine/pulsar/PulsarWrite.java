package io.sparkdlq.engine.pulsar;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;

/**
 * A write of rows with the columns {@code topic, key, value, headers} to the topics they name,
 * from a streaming query or a batch append. Each task waits until the broker has stored every
 * message it sent ({@link MessageWriter}); a failed send fails the task, so the batch fails and
 * its offsets stay uncommitted (at-least-once, as Spark's Kafka sink). There is nothing to do
 * when every task has committed, nor to undo when one failed: what was sent stays sent, and the
 * batch is read and written again.
 */
final class PulsarWrite implements Write, StreamingWrite, BatchWrite {
  private final WriteOptions options;
  private final MessageWriter.Columns columns;

  PulsarWrite(WriteOptions options, StructType schema) {
    this.options = options;
    this.columns = MessageWriter.Columns.of(schema);
  }

  @Override
  public String description() {
    return PulsarDataSource.NAME;
  }

  @Override
  public StreamingWrite toStreaming() {
    return this;
  }

  @Override
  public BatchWrite toBatch() {
    return this;
  }

  @Override
  public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
    return new Factory(options, columns);
  }

  @Override
  public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
    return new Factory(options, columns);
  }

  /** Tasks commit on their own: a task's messages are stored when it commits, whatever the others do. */
  @Override
  public boolean useCommitCoordinator() {
    return false;
  }

  @Override
  public void commit(long epochId, WriterCommitMessage[] messages) {
  }

  @Override
  public void abort(long epochId, WriterCommitMessage[] messages) {
  }

  @Override
  public void commit(WriterCommitMessage[] messages) {
  }

  @Override
  public void abort(WriterCommitMessage[] messages) {
  }

  /** Makes each task's writer, streaming or batch. */
  record Factory(WriteOptions options, MessageWriter.Columns columns)
      implements StreamingDataWriterFactory, DataWriterFactory {

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      return new MessageWriter(options, columns);
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new MessageWriter(options, columns);
    }
  }
}
