/**
 * The engine's Apache Pulsar connector: a Spark DataSource V2 (read: {@link
 * io.sparkdlq.engine.pulsar.PulsarMicroBatchStream}; write: {@link
 * io.sparkdlq.engine.pulsar.PulsarWrite}) on Pulsar's Java client, since no Spark 4 Pulsar
 * connector is published. The Python engine names it by class ({@link
 * io.sparkdlq.engine.pulsar.PulsarDataSource}) in {@code readStream.format(...)} and {@code
 * writeStream.format(...)}; docs/engine.md ("On Pulsar") says what each part guarantees.
 */
package io.sparkdlq.engine.pulsar;
