package io.sparkdlq.engine.pulsar;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;

/** The engine's checks before a run on Pulsar (called from Python, dlq_engine.job.pulsar_topics). */
public final class PulsarTopics {
  private PulsarTopics() {
  }

  /**
   * The topics of {@code names} that do not exist on the broker at {@code serviceUrl}, reached
   * with the client settings of {@code clientDir} (looked up without creating them, whatever the
   * broker's auto-creation); a broker that does not answer within {@code timeoutMs}, or refuses
   * the client, raises {@link PulsarConnectorException}.
   */
  public static List<String> missing(String serviceUrl, String clientDir, List<String> names, long timeoutMs) {
    Broker broker = new Broker(serviceUrl, clientDir);
    List<String> missing = new ArrayList<>();
    for (String name : names) {
      try {
        Clients.client(broker).getPartitionsForTopic(name, false).get(timeoutMs, TimeUnit.MILLISECONDS);
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

  /**
   * Why the client may not write to each of {@code topics}: {@code <topic>: <error>} for each
   * topic the broker refused a producer on for want of the produce permission, nothing for the
   * others (a topic that does not exist is {@link #missing}'s to name). No message is sent; the
   * producers are closed at once. Credentials the broker refuses raise {@link
   * PulsarConnectorException}.
   */
  public static List<String> unwritable(String serviceUrl, String clientDir, List<String> topics, long timeoutMs) {
    Broker broker = new Broker(serviceUrl, clientDir);
    List<String> refused = new ArrayList<>();
    for (String topic : topics) {
      try {
        Producer<byte[]> producer = Clients.client(broker).newProducer().topic(topic).enableBatching(false)
            .createAsync().get(timeoutMs, TimeUnit.MILLISECONDS);
        producer.closeAsync();
      } catch (ExecutionException error) {
        Throwable cause = error.getCause();
        if (cause instanceof PulsarClientException.AuthorizationException) {
          refused.add(topic + ": " + PulsarConnectorException.describe(error));
        } else if (!(cause instanceof PulsarClientException.NotFoundException
            || cause instanceof PulsarClientException.TopicDoesNotExistException)) {
          throw PulsarConnectorException.of("a producer on " + topic, error);
        }
      } catch (TimeoutException | InterruptedException error) {
        throw PulsarConnectorException.of("a producer on " + topic + ": no answer within " + timeoutMs + " ms", error);
      }
    }
    return refused;
  }
}
