package io.sparkdlq.engine.pulsar;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One partition's messages of a micro-batch: the entries after {@code start} up to {@code end},
 * inclusive; {@code topic} as the options name it (the rows' {@code topic}), {@code partition} the
 * partition's full topic name.
 */
record TopicRange(Broker broker, String topic, String partition, Position start, Position end)
    implements InputPartition {
}
