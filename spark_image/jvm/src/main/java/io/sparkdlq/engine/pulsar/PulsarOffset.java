package io.sparkdlq.engine.pulsar;

import java.util.Collections;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A micro-batch's offsets: each partition's position, kept in Spark's checkpoint as JSON, {@code
 * {"persistent://t/ns/topic-partition-0": [ledger, entry], ...}} (the layout the engine's earlier
 * Python data source wrote, so its checkpoints go on here).
 */
final class PulsarOffset extends Offset {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<Map<String, long[]>> LAYOUT = new TypeReference<>() {
  };

  private final SortedMap<String, Position> positions;

  PulsarOffset(Map<String, Position> positions) {
    this.positions = Collections.unmodifiableSortedMap(new TreeMap<>(positions));
  }

  SortedMap<String, Position> positions() {
    return positions;
  }

  /** The partition's position; {@link Position#BEFORE_ALL} for a partition this offset does not know. */
  Position get(String partition) {
    return positions.getOrDefault(partition, Position.BEFORE_ALL);
  }

  @Override
  public String json() {
    Map<String, long[]> layout = new TreeMap<>();
    positions.forEach((partition, position) -> layout.put(partition, new long[] {position.ledger(), position.entry()}));
    try {
      return JSON.writeValueAsString(layout);
    } catch (JsonProcessingException error) {
      throw new IllegalStateException("cannot write Pulsar offsets " + positions, error);
    }
  }

  static PulsarOffset fromJson(String json) {
    Map<String, long[]> layout;
    try {
      layout = JSON.readValue(json, LAYOUT);
    } catch (JsonProcessingException error) {
      throw new IllegalArgumentException(PulsarDataSource.NAME + ": unreadable offsets in the checkpoint: " + json,
          error);
    }
    Map<String, Position> positions = new TreeMap<>();
    layout.forEach((partition, position) -> {
      if (position.length != 2) {
        throw new IllegalArgumentException(
            PulsarDataSource.NAME + ": offset of " + partition + " is not [ledger, entry]: " + json);
      }
      positions.put(partition, new Position(position[0], position[1]));
    });
    return new PulsarOffset(positions);
  }
}
