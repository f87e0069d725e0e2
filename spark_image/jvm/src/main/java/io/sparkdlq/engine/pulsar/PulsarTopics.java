package io.sparkdlq.engine.pulsar;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.pulsar.client.api.PulsarClientException;

/** The engine's check before a run on Pulsar (called from Python, dlq_engine.job.pulsar_topics). */
public final class PulsarTopics {
  private PulsarTopics() {
  }

  /**
   * The topics of {@code names} that do not exist on the broker at {@code serviceUrl} (looked up
   * without creating them, whatever the broker's auto-creation); a broker that does not answer
   * within {@code timeoutMs} raises {@link PulsarConnectorException}.
   */
  public static List<String> missing(String serviceUrl, List<String> names, long timeoutMs) {
    List<String> missing = new ArrayList<>();
    for (String name : names) {
      try {
        Clients.client(serviceUrl).getPartitionsForTopic(name, false).get(timeoutMs, TimeUnit.MILLISECONDS);
      } catch (ExecutionException error) {
        if (error.getCause() instanceof PulsarClientException.NotFoundException
            || error.getCause() instanceof PulsarClientException.TopicDoesNotExistException) {
          missing.add(name);
        } else {
          throw PulsarConnectorException.of("looking up " + name, error);
        }
      } catch (TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("looking up " + name + ": no answer within " + timeoutMs + " ms", error);
      }
    }
    return missing;
  }
}
