package io.sparkdlq.engine.pulsar;

/** A Pulsar read or write failed; the message names the topic and what failed. */
public final class PulsarConnectorException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  PulsarConnectorException(String message, Throwable cause) {
    super(message, cause);
  }

  PulsarConnectorException(String message) {
    super(message);
  }

  /** {@code <simple class name>: <message>} of an error, its cause's for a wrapper without a message of its own. */
  static String describe(Throwable error) {
    Throwable shown = error;
    while (shown.getCause() != null && (shown.getMessage() == null || shown instanceof java.util.concurrent.ExecutionException
        || shown instanceof java.util.concurrent.CompletionException)) {
      shown = shown.getCause();
    }
    return shown.getClass().getSimpleName() + ": " + shown.getMessage();
  }
}
