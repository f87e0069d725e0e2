package io.sparkdlq.bench.peers.connect;

import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/** A sink connector that publishes every record it is given to one Kafka topic ({@code
 * output.topic} on {@code output.bootstrap.servers}): the output topic of the benchmark. */
public class TopicSink extends SinkConnector {
  static final ConfigDef CONFIG =
      new ConfigDef()
          .define("output.topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the output topic")
          .define("output.bootstrap.servers", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
              "the output topic's brokers");

  private Map<String, String> settings;

  @Override
  public void start(Map<String, String> props) {
    CONFIG.parse(props);
    settings = Map.copyOf(props);
  }

  @Override
  public Class<? extends Task> taskClass() {
    return TopicSinkTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    return java.util.Collections.nCopies(maxTasks, settings);
  }

  @Override
  public void stop() {}

  @Override
  public ConfigDef config() {
    return CONFIG;
  }

  @Override
  public String version() {
    return "0";
  }
}
